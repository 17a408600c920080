/* softrdmad: the STATUS report (ipc.h). */
#include <stdio.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "daemon/softrdmad.h"

const char *const drop_name[DROP_NREASONS] = {
	[DROP_SHORT] = "short",
	[DROP_TOO_BIG] = "too_big",
	[DROP_NO_QP1_OWNER] = "no_qp1_owner",
	[DROP_UNKNOWN_QPN] = "unknown_qpn",
	[DROP_CLIENT_FULL] = "client_full",
	[DROP_CLIENT_ERR] = "client_error",
	[DROP_LOOP] = "loop",
	[DROP_BAD_IPC] = "bad_ipc",
	[DROP_MCAST_NO_MEMBER] = "no_mcast_member",
	[DROP_FOREIGN] = "foreign_forward",
};

const char *const cm_name[CM_NCOUNTERS] = {
	[CM_TO_LISTENER] = "to_listener", [CM_TO_REQ_OWNER] = "to_req_owner",
	[CM_TO_ID_OWNER] = "to_id_owner", [CM_TO_QP1_OWNER] = "to_qp1_owner",
	[CM_REJ_SENT] = "rej_sent",	  [CM_SIDR_REP_SENT] = "sidr_rep_sent",
	[CM_DREP_SENT] = "drep_sent",	  [CM_ANSWER_LIMITED] = "answer_limited",
	[CM_ANSWER_ERR] = "answer_error", [CM_MALFORMED] = "malformed",
	[CM_NOT_CM] = "not_cm",		  [CM_UNSUPPORTED] = "unsupported",
	[CM_NO_LISTENER] = "no_listener", [CM_UNKNOWN_ID] = "unknown_id",
};

uint32_t status_clients(const struct client *c)
{
	return client_trusted(c) ? d.nclients : c->user->n[Q_CLIENTS];
}

/* What c may see of x (a client, a user's figures): everything if it is
 * trusted, else only its own user's. */
static bool sees(const struct client *c, const struct user *u)
{
	return client_trusted(c) || c->user == u;
}

size_t status_text(const struct client *asker, char *buf, size_t cap)
{
	size_t n = 0;
	struct timespec now;
	long up;
	bool all = client_trusted(asker);
	const struct user *me = asker->user;
	const struct traffic *t = all ? &d.all : &me->t;
	uint32_t rs_n = 0;

#define OUT(...)                                                          \
	do {                                                              \
		if (n < cap) {                                            \
			int k_ = snprintf(buf + n, cap - n, __VA_ARGS__); \
			n += k_ > 0 ? (size_t)k_ : 0;                     \
		}                                                         \
	} while (0)

	if (all)
		rs_n = d.rs_n;
	else
		for (const struct req_seen *e = d.rs_oldest; e; e = e->newer)
			rs_n += e->owner->user == me;
	clock_gettime(CLOCK_MONOTONIC, &now);
	up = (long)(now.tv_sec - d.start.tv_sec);
	OUT("pid %ld\n", (long)getpid());
	OUT("uptime %lds\n", up);
	OUT("socket @%s\n", d.sock_name);
	OUT("udp port %d:%s%s (rcvbuf %d)\n", SR_ROCE_UDP_PORT, d.udp4_fd >= 0 ? " 0.0.0.0" : "",
	    d.udp6_fd >= 0 ? " [::]" : "", d.udp_rcvbuf);
	if (d.idle_exit)
		OUT("idle-exit %ds\n", d.idle_exit);
	else
		OUT("idle-exit never\n");
	if (!all)
		OUT("view uid %ld (this user's figures only)\n", (long)me->uid);
	OUT("qpns %u\n", all ? d.qpns.n : me->n[Q_QPN]);
	OUT("qp1 owner %ld\n", d.qp1_owner && sees(asker, d.qp1_owner->user) ? (long)d.qp1_owner->pid : 0L);
	OUT("comm ids %u\n", all ? d.comm_ids.n : me->n[Q_COMM_ID]);
	OUT("listens %u\n", all ? d.nlistens : me->n[Q_LISTEN]);
	OUT("cm peers %u\n", rs_n);
	OUT("clients %u\n", status_clients(asker));
	OUT("received %llu (udp %llu, from clients %llu)\n", (unsigned long long)(t->rx_udp + t->rx_client),
	    (unsigned long long)t->rx_udp, (unsigned long long)t->rx_client);
	OUT("forwarded %llu\n", (unsigned long long)t->forwarded);
	{
		unsigned long long total = 0;

		for (int i = 0; i < DROP_NREASONS; i++)
			total += t->drops[i];
		OUT("dropped %llu", total);
		for (int i = 0; i < DROP_NREASONS; i++)
			OUT(" %s=%llu", drop_name[i], (unsigned long long)t->drops[i]);
		OUT("\n");
	}
	OUT("cm wills sent %llu\n", (unsigned long long)t->wills_sent);
	OUT("cm wills queued %u\n", all ? d.nwills_queued : me->wills_queued);
	/* QP1 datagrams: received, then where each went or why it did not. */
	OUT("cm rx=%llu", (unsigned long long)t->cm_rx);
	for (int i = 0; i < CM_NCOUNTERS; i++)
		OUT(" %s=%llu", cm_name[i], (unsigned long long)t->cm[i]);
	OUT("\n");
	OUT("mcast groups %u\n", all ? d.nmcast : me->n[Q_MCAST]);
	/* Lists last: a long one is cut at the end of the message, and the
	 * counters above stay. */
	for (struct user *u = d.users; u; u = u->next) {
		bool holds = false;

		for (int i = 0; i < Q_NQUOTAS; i++)
			holds |= u->n[i] != 0;
		if (holds && sees(asker, u))
			OUT("user uid %ld connections %u qpns %u comm_ids %u listens %u wills %u mcast %u%s\n",
			    (long)u->uid, u->n[Q_CLIENTS], u->n[Q_QPN], u->n[Q_COMM_ID], u->n[Q_LISTEN], u->n[Q_WILL],
			    u->n[Q_MCAST], u->uid == d.euid ? " (no quotas)" : "");
	}
	for (struct mc_group *g = d.mcast; g; g = g->next) {
		char a[INET6_ADDRSTRLEN];
		uint32_t members = 0;
		uint64_t delivered = 0;

		for (struct mc_member *m = g->members; m; m = m->next)
			if (sees(asker, m->c->user)) {
				members++;
				delivered += m->delivered;
			}
		if (!members && !all)
			continue;
		inet_ntop(AF_INET6, &g->addr, a, sizeof(a));
		OUT("mcast group %s ifindex %d clients %u delivered %llu\n", a, g->ifindex, members,
		    (unsigned long long)(all ? g->delivered : delivered));
	}
	/* one line per rdma_cm listen, for scripts waiting on a server */
	for (uint32_t b = 0; b < LISTEN_BUCKETS; b++)
		for (struct listener *l = d.listens[b]; l; l = l->next) {
			char a[INET6_ADDRSTRLEN];

			if (!sees(asker, l->owner->user))
				continue;
			inet_ntop(AF_INET6, &l->addr, a, sizeof(a));
			OUT("listen service 0x%016llx addr %s pid %ld\n", (unsigned long long)l->service_id, a,
			    (long)l->owner->pid);
		}
	for (struct client *c = d.clients; c; c = c->next)
		if (sees(asker, c->user))
			OUT("  client pid %ld uid %ld qpns %u comm_ids %u listens %u%s delivered %llu dropped %llu\n",
			    (long)c->pid, (long)c->uid, c->nqpn, c->ncomm_id, c->nlisten,
			    d.qp1_owner == c ? " qp1" : "", (unsigned long long)c->delivered,
			    (unsigned long long)c->dropped_full);
#undef OUT
	return n < cap ? n : cap;
}
