/* The input format of fuzz_rsocket.c, shared with the seed generator
 * (fuzz_seeds.c):
 *
 *   cfg      bit 0 iWARP (messages as sends), bit 1 a dishonest peer from
 *            the start (then 40 bytes of raw connection data follow the
 *            sizes), bit 2 the peer says it is big-endian, bits 3-4 the
 *            inline size asked for (0, 4, 16, 64)
 *   sizes    one byte each: send queue (16 + b % 49), receive queue, send
 *            buffer (4 KiB * (1 + b % 32)), receive buffer (256 B *
 *            (1 + b % 128)), target iomap entries (b % 9), the peer's
 *            credits (1 + b % 64)
 *   [conn]   40 bytes, dishonest peers only
 *   ops      one byte each (enum fz_rs_op, modulo FZ_RS_OP_COUNT) and its
 *            arguments, until the input ends. */
#ifndef SR_FUZZ_RSOCKET_H
#define SR_FUZZ_RSOCKET_H

enum fz_rs_op {
	FZ_RS_APP_SEND, /* u16 length */
	FZ_RS_APP_RECV, /* u8 flags (1 PEEK, 2 WAITALL), u16 length */
	FZ_RS_APP_PROGRESS,
	FZ_RS_APP_RIOMAP,   /* u8 slot, u16 length, u16 offset */
	FZ_RS_APP_RIOWRITE, /* u16 length, u16 offset */
	FZ_RS_APP_CTRL,	    /* u8: 1 SHUTDOWN, 0 DISCONNECT */
	FZ_RS_NIC_COMPLETE, /* u8 count */
	FZ_RS_NIC_ERROR,    /* u8 status */
	FZ_RS_PEER_DATA,    /* u16 length */
	FZ_RS_PEER_GRANT,   /* u32 size */
	FZ_RS_PEER_CREDIT,
	FZ_RS_PEER_IOMAP, /* u8 entry, u16 offset, u16 length, u16 map offset */
	FZ_RS_PEER_CTRL,  /* u8: 1 SHUTDOWN, 0 DISCONNECT */
	FZ_RS_RAW_MSG,	  /* u32 message, u32 byte_len */
	FZ_RS_RAW_TARGET, /* u16 offset, u8 length, bytes */
	FZ_RS_RAW_RBUF,	  /* u16 offset, u8 length, bytes */
	FZ_RS_OP_COUNT
};

#endif
