# The fuzz targets and the production sources each one links, shared by
# tests/CMakeLists.txt (replay programs, any compiler, any sanitizer) and
# tests/fuzz/CMakeLists.txt (libFuzzer programs, clang).  A harness is
# tests/fuzz/fuzz_NAME.c.
set(SR_FZ_SRC ${CMAKE_CURRENT_LIST_DIR}/../../src)
file(GLOB SR_FZ_ROCE_WIRE CONFIGURE_DEPENDS ${SR_FZ_SRC}/roce/wire/*.c)
file(GLOB SR_FZ_IWARP_WIRE CONFIGURE_DEPENDS ${SR_FZ_SRC}/iwarp/wire/*.c)

set(SR_FUZZ_TARGETS roce_parse iwarp_parse cm_mad mpa conf rsocket rs_dgram daemon iwarp_rx)
set(SR_FUZZ_SRC_roce_parse ${SR_FZ_ROCE_WIRE})
set(SR_FUZZ_SRC_iwarp_parse ${SR_FZ_IWARP_WIRE} ${SR_FZ_ROCE_WIRE})
set(SR_FUZZ_SRC_cm_mad ${SR_FZ_SRC}/cm/cm_mad.c ${SR_FZ_ROCE_WIRE})
set(SR_FUZZ_SRC_mpa ${SR_FZ_IWARP_WIRE} ${SR_FZ_ROCE_WIRE})
set(SR_FUZZ_SRC_conf ${SR_FZ_SRC}/common/conf.c ${SR_FZ_SRC}/common/fault_spec.c ${SR_FZ_SRC}/common/netdev.c)
# rs_data.c against the fake RDMA device the harness defines
set(SR_FUZZ_SRC_rsocket ${SR_FZ_SRC}/rsocket/rs_data.c ${SR_FZ_SRC}/rsocket/rs_config.c)
# datagram rsockets' headers (the UDP resolution message, the UD header)
set(SR_FUZZ_SRC_rs_dgram ${SR_FZ_SRC}/rsocket/rs_dgram_wire.c)
# softrdmad without main.c; what the daemon sends itself and its multicast
# joins are caught by the harness (fuzz_daemon.c)
file(GLOB SR_FZ_DAEMON CONFIGURE_DEPENDS ${SR_FZ_SRC}/daemon/*.c)
list(REMOVE_ITEM SR_FZ_DAEMON ${SR_FZ_SRC}/daemon/main.c)
set(SR_FUZZ_SRC_daemon ${SR_FZ_DAEMON} ${SR_FZ_SRC}/cm/cm_mad.c ${SR_FZ_ROCE_WIRE})
set(SR_FUZZ_LINK_daemon -Wl,--wrap=sendmsg,--wrap=setsockopt)
# the whole verbs library (src/abi, core, roce, iwarp, common), for the
# iWARP receive path; the daemon's install paths are only compiled in
file(GLOB SR_FZ_VERBS CONFIGURE_DEPENDS ${SR_FZ_SRC}/abi/verbs_*.c ${SR_FZ_SRC}/core/*.c ${SR_FZ_SRC}/roce/*.c ${SR_FZ_SRC}/iwarp/*.c
  ${SR_FZ_SRC}/common/*.c)
set(SR_FUZZ_SRC_iwarp_rx ${SR_FZ_VERBS} ${SR_FZ_IWARP_WIRE} ${SR_FZ_ROCE_WIRE})
set(SR_FUZZ_DEFS_iwarp_rx SR_REL_PKGLIB_TO_SBIN="../../sbin" SR_REL_BIN_TO_SBIN="../sbin")
# Largest input each target is given (libFuzzer's -max_len).
set(SR_FUZZ_MAXLEN_roce_parse 4200)
set(SR_FUZZ_MAXLEN_iwarp_parse 4200)
set(SR_FUZZ_MAXLEN_cm_mad 600)
set(SR_FUZZ_MAXLEN_mpa 1200)
set(SR_FUZZ_MAXLEN_conf 2048)
set(SR_FUZZ_MAXLEN_rsocket 2048)
set(SR_FUZZ_MAXLEN_rs_dgram 2100)
set(SR_FUZZ_MAXLEN_daemon 8192)
set(SR_FUZZ_MAXLEN_iwarp_rx 4096)
