/* softrdmad: who its clients are, and what each may do (ipc.h, "Users").
 *
 * One daemon serves every user of a network namespace: UDP port 4791 can
 * be shared only by sockets of one uid (SO_REUSEPORT), and QPNs must be
 * unique host-wide.  So the daemon trusts no client: a client is its
 * SO_PEERCRED uid, acts only on what it allocated, and each uid holds at
 * most a quota of what all share (connections, QPNs, Communication IDs,
 * listens, CM wills, multicast memberships).  Root and the daemon's own
 * uid, who could kill or trace the daemon anyway, are trusted: they may
 * claim QP1, hand over datagrams for anyone, and have no quotas. */
#include <errno.h>
#include <stdlib.h>

#include "daemon/softrdmad.h"

static const uint32_t quota_max[Q_NQUOTAS] = {
	[Q_CLIENTS] = 1024,	/* a process holds one per verbs context, one for rdma_cm */
	[Q_QPN] = 1u << 17,	/* 1/8 of the daemon's limit of live QPNs */
	[Q_COMM_ID] = 1u << 16, /* 1/16 of the daemon's live Communication IDs */
	[Q_LISTEN] = 4096,	/* 1/16 of the daemon's listens */
	[Q_WILL] = 16384,	/* established rdma_cm connections that get a DREQ at death */
	[Q_MCAST] = 256,	/* 1/4 of the host's (group, interface) pairs */
};

static const char *const quota_name[Q_NQUOTAS] = {
	[Q_CLIENTS] = "connection", [Q_QPN] = "QPN",	  [Q_COMM_ID] = "Communication ID",
	[Q_LISTEN] = "listen",	    [Q_WILL] = "CM will", [Q_MCAST] = "multicast membership",
};

struct user *user_get(uid_t uid)
{
	struct user *u;

	for (u = d.users; u; u = u->next)
		if (u->uid == uid)
			return u;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->uid = uid;
	u->next = d.users;
	d.users = u;
	return u;
}

int quota_take(struct user *u, enum quota q)
{
	if (u->uid != d.euid && u->n[q] >= quota_max[q]) {
		if (!(u->warned & (1u << q))) {
			u->warned |= 1u << q;
			logmsg("uid %ld reached its quota of %u %ss: refusing more", (long)u->uid, quota_max[q],
			       quota_name[q]);
		}
		return -EDQUOT;
	}
	u->n[q]++;
	return 0;
}

void quota_give(struct user *u, enum quota q)
{
	u->n[q]--;
}

bool client_trusted(const struct client *c)
{
	return c->uid == 0 || c->uid == d.euid;
}

bool may_forward(const struct client *from, const struct client *to)
{
	/* Within one uid a process could write into the other's memory
	 * anyway (ptrace); across uids the daemon cannot vouch for
	 * addresses a client claims. */
	return from->user == to->user || client_trusted(from);
}
