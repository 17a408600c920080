/* The input format of fuzz_daemon.c, shared with the seed generator
 * (fuzz_seeds.c): a sequence of steps until the input ends, each
 *
 *   who    u8: a local client 0..FZ_D_CLIENTS-1 (its IPC message), or
 *          FZ_D_UDP (a datagram from the network on UDP 4791), or
 *          FZ_D_DROP + client (that client's connection closes)
 *   len    u16, little-endian, then len bytes:
 *          a client: one IPC message as it arrives on its SOCK_SEQPACKET
 *          socket (struct sr_ipc_hdr and body, any bytes);
 *          UDP: struct fz_d_env, then the UDP payload. */
#ifndef SR_FUZZ_DAEMON_H
#define SR_FUZZ_DAEMON_H

#include <stdint.h>

#include "common/ipc.h"

#define FZ_D_CLIENTS 4
#define FZ_D_UDP 0x80
#define FZ_D_DROP 0x40

struct fz_d_env {
	uint8_t v6;	 /* received on the IPv6 socket */
	uint8_t src[16]; /* sender, IPv4 as IPv4-mapped */
	uint8_t dst[16]; /* local address it was sent to */
	uint16_t sport;	 /* sender's UDP port */
} __attribute__((packed));

#define FZ_D_ENV sizeof(struct fz_d_env)

#endif
