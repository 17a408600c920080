/* Address handles (UD): ibv_create_ah/ibv_destroy_ah. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/sr.h"

/* As uverbs and rxe: the PD's handle, the address vector, then a place in
 * the device's AH limit. */
struct ibv_ah *sr_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct sr_ah *ah = NULL;
	struct sr_obj *pdo;
	int err;

	if (!(pdo = sr_obj_get(pd, SR_OBJ_PD, NULL, &err)))
		goto out;
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		err = ENOMEM;
		goto out;
	}
	if ((err = sr_av_from_ah_attr(to_sctx(pd->context), attr, &ah->av)) ||
	    (err = sr_obj_add(to_sctx(pd->context), &ah->obj, &ah->ibah, SR_OBJ_AH))) {
		free(ah);
		ah = NULL;
		goto out;
	}
	ah->ibah.context = pd->context;
	ah->ibah.pd = pd;
	sr_pd_use(pd, 1);
out:
	if (pdo)
		sr_obj_put(pdo);
	if (!ah)
		errno = err;
	return ah ? &ah->ibah : NULL;
}

int sr_destroy_ah(struct ibv_ah *ah)
{
	int err;
	struct sr_obj *o = sr_obj_claim(ah, SR_OBJ_AH, &err);

	if (!o)
		return err;
	sr_obj_del(o);
	sr_pd_use(ah->pd, -1);
	free(to_sah(ah));
	return 0;
}
