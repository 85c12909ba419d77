/*
 * The one-sided tests of axon_perf, shared by perf_rma.c (the tests, setup)
 * and perf_rlayout.c (-R: the target's layout, its key and the baselines
 * that fill it without one).
 */
#ifndef AXON_PERF_RMA_H
#define AXON_PERF_RMA_H

#include <stddef.h>
#include <stdint.h>
#include "axon.h"
#include "axon_perf.h"

#define PERF_RMA_AMO_ALIGN 64     /* the atomic word sits on its own cache line */
#define PERF_RMA_KEY_MAX   65536  /* sanity bound on a peer's packed key */

typedef struct {
    const perf_params_t *params;
    perf_role_t          role;
    int                  fd;
    axon_context_h       context;
    axon_worker_h        worker;
    axon_ep_h            ep;
    axon_ep_attr_t       attr;
    axon_mem_h           memh;
    uint8_t             *mem;        /* our region: [data][pad][atomic word] */
    size_t               max_size;
    size_t               amo_offset;
    uint8_t             *lbuf;       /* local source or destination */
    size_t               lspan;      /* its bytes: the largest span of a size's layout */
    perf_layout_t        lay;        /* -D: this size's layout of lbuf */
    perf_layout_t       *data;       /* &lay, or NULL: contiguous (fill and verify) */
    const axon_layout_t *layout;     /* &lay.layout, or NULL: contiguous */
    axon_request_h      *reqs;       /* one per window slot */
    uint64_t             raddr;      /* the peer's region */
    axon_rkey_h          rkey;
    uint64_t             amo_expect[2]; /* -c: the next value amo_lat fetches (32, 64 bits) */
    /* -R: both processes are targets (put_lat puts both ways) */
    perf_layout_t        rlay;       /* this size's layout of the target's data */
    perf_layout_t       *tdata;      /* &rlay, or NULL: contiguous */
    uint8_t             *tmem;       /* where the peer's data lands here: rbuf or mem */
    uint8_t             *rbuf;       /* key method: the buffer mapped as a layout */
    size_t               rspan;      /* bytes of the largest size's -R layout */
    axon_mem_h           lay_memh;   /* key method: this size's layout key here */
    axon_rkey_h          lay_rkey;   /* ... and the peer's */
    uint64_t             lay_raddr;
    axon_rkey_h          op_rkey;    /* what puts and gets name: rkey, or lay_rkey */
    uint64_t             op_raddr;
    size_t               bounce_offset; /* pack_unpack: the bounce slots in the region */
    uint8_t             *bounce;     /* pack_unpack with -D: the gathered bytes */
    axon_request_h      *sreqs;      /* pack_unpack: the messages, one per window slot */
    uint64_t            *words;      /* pack_unpack: their payload (a slot number), then
                                      * the answers' */
} perf_rma_t;

/* What the initiating calls have in common: retry while out of resources. */
typedef enum {
    PERF_RMA_PUT, PERF_RMA_PUT_PACKED, PERF_RMA_GET, PERF_RMA_FADD, PERF_RMA_ADD, PERF_RMA_FLUSH,
    PERF_RMA_OP_LAST
} perf_rma_op_t;
extern const char *const perf_rma_op_names[PERF_RMA_OP_LAST];

/* Complete one operation (req NULL: it completed at once) and free it; 0 or -1 (printed). */
int  perf_rma_wait(perf_rma_t *m, axon_request_h req, const char *what);
/* Start op; *req_p is NULL if it completed at once. */
int  perf_rma_start(perf_rma_t *m, perf_rma_op_t op, void *buf, size_t size, uint64_t raddr,
                    axon_request_h *req_p);
/* Start op and complete it. */
int  perf_rma_do(perf_rma_t *m, perf_rma_op_t op, void *buf, size_t size, uint64_t raddr);
/* Complete the operation in window slot (m->reqs), if any; the slot is free then. */
int  perf_rma_slot_free(perf_rma_t *m, unsigned slot, const char *what);
/* Drain every slot of the window. */
int  perf_rma_drain(perf_rma_t *m, const char *what);
/* Drain, then flush: every put has landed. */
int  perf_rma_flush(perf_rma_t *m, const char *what);
/* Send the key of memh and the address peers put to, read and unpack the peer's. */
int  perf_rma_swap_keys(perf_rma_t *m, axon_mem_h memh, const void *address,
                        uint64_t *raddr_p, axon_rkey_h *rkey_p);

/* perf_rlayout.c. Its buffers, at setup (0, or -1 out of memory). */
int  perf_rlayout_alloc(perf_rma_t *m);
/* A size begins: its layout of the target's data and, with the key method,
 * the key swapped with the peer (a clear line when axon_mem_map refuses). */
int  perf_rlayout_size(perf_rma_t *m, size_t size);
/* A size ends (both sides past its last sync), or the run fails: the key goes. */
void perf_rlayout_key_free(perf_rma_t *m);
/* put_bw -R --separate-puts, the initiator (the target progresses). */
int  perf_rlayout_separate_puts(perf_rma_t *m, size_t size, double *elapsed);
/* put_bw -R --pack-unpack, the initiator and the target. */
int  perf_rlayout_pack_unpack(perf_rma_t *m, size_t size, double *elapsed);
int  perf_rlayout_unpack(perf_rma_t *m, size_t size);

#endif
