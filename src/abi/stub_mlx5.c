/* Stand-in for rdma-core's libmlx5.so.1 (Mellanox/NVIDIA mlx5 direct verbs).
 *
 * Debian's perftest binaries are linked against libmlx5.so.1 and so cannot
 * start without one, yet the real library needs rdma-core's private
 * provider ABI (IBVERBS_PRIVATE_34) that softrdma's libibverbs does not
 * offer.  perftest only reaches these calls for mlx5 devices (DC, crypto,
 * --use_ooo), so each answers as the real libmlx5 answers for a device it
 * does not drive: NULL with errno EOPNOTSUPP, or EOPNOTSUPP returned.
 *
 * The version nodes (stub_mlx5.map) are the real library's, since the
 * binaries record them at link time. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include <infiniband/mlx5dv.h>

#define STUB_EXPORT __attribute__((visibility("default")))

STUB_EXPORT int mlx5dv_query_device(struct ibv_context *ctx_in, struct mlx5dv_context *attrs_out)
{
	return EOPNOTSUPP;
}

STUB_EXPORT int mlx5dv_init_obj(struct mlx5dv_obj *obj, uint64_t obj_type)
{
	return EOPNOTSUPP;
}

STUB_EXPORT struct ibv_qp *mlx5dv_create_qp(struct ibv_context *context, struct ibv_qp_init_attr_ex *qp_attr,
					    struct mlx5dv_qp_init_attr *mlx5_qp_attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT struct ibv_context *mlx5dv_open_device(struct ibv_device *device, struct mlx5dv_context_attr *attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT int mlx5dv_devx_general_cmd(struct ibv_context *context, const void *in, size_t inlen, void *out,
					size_t outlen)
{
	return EOPNOTSUPP;
}

STUB_EXPORT bool mlx5dv_is_supported(struct ibv_device *device)
{
	return false;
}

STUB_EXPORT struct mlx5dv_mkey *mlx5dv_create_mkey(struct mlx5dv_mkey_init_attr *mkey_init_attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* Nothing can have been created by the functions above, so there is
 * nothing to destroy; answer as for a foreign object. */
STUB_EXPORT int mlx5dv_destroy_mkey(struct mlx5dv_mkey *mkey)
{
	return EOPNOTSUPP;
}

/* The real one is a container_of() that cannot fail; no QP here is an
 * mlx5 QP, so NULL is the only honest answer. */
STUB_EXPORT struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qp)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT int mlx5dv_crypto_login(struct ibv_context *context, struct mlx5dv_crypto_login_attr *login_attr)
{
	return EOPNOTSUPP;
}

STUB_EXPORT struct mlx5dv_dek *mlx5dv_dek_create(struct ibv_context *context, struct mlx5dv_dek_init_attr *init_attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT int mlx5dv_dek_destroy(struct mlx5dv_dek *dek)
{
	return EOPNOTSUPP;
}

/* One entry point for each remaining version node of the real library, so
 * that every node is defined by a symbol as there (a node holding no
 * symbol is emitted flagged WEAK), and the common creation calls of each
 * era answer "not this device" instead of failing to resolve. */

STUB_EXPORT struct ibv_cq_ex *mlx5dv_create_cq(struct ibv_context *context, struct ibv_cq_init_attr_ex *cq_attr,
					       struct mlx5dv_cq_init_attr *mlx5_cq_attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT int mlx5dv_get_clock_info(struct ibv_context *context, struct mlx5dv_clock_info *clock_info)
{
	return EOPNOTSUPP;
}

STUB_EXPORT struct ibv_flow_action *mlx5dv_create_flow_action_esp(struct ibv_context *ctx,
								  struct ibv_flow_action_esp_attr *esp,
								  struct mlx5dv_flow_action_esp *mlx5_attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT struct mlx5dv_flow_matcher *mlx5dv_create_flow_matcher(struct ibv_context *context,
								   struct mlx5dv_flow_matcher_attr *matcher_attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT struct mlx5dv_devx_cmd_comp *mlx5dv_devx_create_cmd_comp(struct ibv_context *context)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT struct mlx5dv_devx_event_channel *
mlx5dv_devx_create_event_channel(struct ibv_context *context, enum mlx5dv_devx_create_event_channel_flags flags)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT struct mlx5dv_var *mlx5dv_alloc_var(struct ibv_context *context, uint32_t flags)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT struct mlx5dv_pp *mlx5dv_pp_alloc(struct ibv_context *context, size_t pp_context_sz, const void *pp_context,
					      uint32_t flags)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT int mlx5dv_query_qp_lag_port(struct ibv_qp *qp, uint8_t *port_num, uint8_t *active_port_num)
{
	return EOPNOTSUPP;
}

STUB_EXPORT struct mlx5dv_dr_action *mlx5dv_dr_action_create_dest_devx_tir(struct mlx5dv_devx_obj *devx_obj)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT struct mlx5dv_dr_action *mlx5dv_dr_action_create_flow_sampler(struct mlx5dv_dr_flow_sampler_attr *attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT int mlx5dv_modify_qp_udp_sport(struct ibv_qp *qp, uint16_t udp_sport)
{
	return EOPNOTSUPP;
}

STUB_EXPORT int mlx5dv_reserved_qpn_alloc(struct ibv_context *ctx, uint32_t *qpn)
{
	return EOPNOTSUPP;
}

STUB_EXPORT int _mlx5dv_query_port(struct ibv_context *context, uint32_t port_num, struct mlx5dv_port *info,
				   size_t info_len)
{
	return EOPNOTSUPP;
}

STUB_EXPORT int mlx5dv_map_ah_to_qp(struct ibv_ah *ah, uint32_t qp_num)
{
	return EOPNOTSUPP;
}

STUB_EXPORT int mlx5dv_dr_aso_other_domain_link(struct mlx5dv_devx_obj *devx_obj, struct mlx5dv_dr_domain *peer_dmn,
						struct mlx5dv_dr_domain *dmn, uint32_t flags, uint8_t return_reg_c)
{
	return EOPNOTSUPP;
}

STUB_EXPORT struct mlx5dv_devx_eq *mlx5dv_devx_create_eq(struct ibv_context *ibctx, const void *in, size_t inlen,
							 void *out, size_t outlen)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT struct mlx5dv_crypto_login_obj *mlx5dv_crypto_login_create(struct ibv_context *context,
								       struct mlx5dv_crypto_login_attr_ex *login_attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}
