/* Address handles (UD): ibv_create_ah/ibv_destroy_ah. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/sr.h"

struct ibv_ah *sr_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct sr_context *ctx = to_sctx(pd->context);
	struct sr_ah *ah = calloc(1, sizeof(*ah));
	int err;

	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	err = sr_av_from_ah_attr(ctx, attr, &ah->av);
	if (err) {
		free(ah);
		errno = err;
		return NULL;
	}
	ah->ibah.context = pd->context;
	ah->ibah.pd = pd;
	atomic_fetch_add(&to_spd(pd)->usecnt, 1);
	return &ah->ibah;
}

int sr_destroy_ah(struct ibv_ah *ah)
{
	atomic_fetch_sub(&to_spd(ah->pd)->usecnt, 1);
	free(to_sah(ah));
	return 0;
}
