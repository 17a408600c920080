/* Stand-in for rdma-core's libefa.so.1 (Amazon EFA direct verbs).
 *
 * Debian's perftest binaries are linked against libefa.so.1 and so cannot
 * start without one, yet the real library needs rdma-core's private
 * provider ABI (IBVERBS_PRIVATE_34) that softrdma's libibverbs does not
 * offer.  perftest only calls into it for devices that are EFA, so every
 * entry point here answers the way the real libefa answers for a device
 * that is not an EFA: EOPNOTSUPP, as a return value or in errno.
 *
 * The version nodes (stub_efa.map) are the real library's, since the
 * binaries record them at link time. */
#include <errno.h>
#include <stddef.h>

#include <infiniband/efadv.h>

#define STUB_EXPORT __attribute__((visibility("default")))

STUB_EXPORT struct ibv_qp *efadv_create_driver_qp(struct ibv_pd *ibvpd, struct ibv_qp_init_attr *attr,
						  uint32_t driver_qp_type)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT struct ibv_qp *efadv_create_qp_ex(struct ibv_context *ibvctx, struct ibv_qp_init_attr_ex *attr_ex,
					      struct efadv_qp_init_attr *efa_attr, uint32_t inlen)
{
	errno = EOPNOTSUPP;
	return NULL;
}

STUB_EXPORT int efadv_query_device(struct ibv_context *ibvctx, struct efadv_device_attr *attr, uint32_t inlen)
{
	return EOPNOTSUPP;
}

STUB_EXPORT int efadv_query_ah(struct ibv_ah *ibvah, struct efadv_ah_attr *attr, uint32_t inlen)
{
	return EOPNOTSUPP;
}

STUB_EXPORT struct ibv_cq_ex *efadv_create_cq(struct ibv_context *ibvctx, struct ibv_cq_init_attr_ex *attr_ex,
					      struct efadv_cq_init_attr *efa_attr, uint32_t inlen)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* The real one is a container_of() that cannot fail; no CQ can have come
 * from efadv_create_cq() here, so NULL is the only honest answer. */
STUB_EXPORT struct efadv_cq *efadv_cq_from_ibv_cq_ex(struct ibv_cq_ex *ibvcqx)
{
	errno = EOPNOTSUPP;
	return NULL;
}
