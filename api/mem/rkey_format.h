/*
 * The packed remote key: what axon_rkey_pack writes (rkey.c) and every
 * peer reads back from bytes it did not write, here first.
 *
 * Packed key, version 4. Every field little-endian, fixed width, no
 * padding; offsets in bytes:
 *
 *   header (72)
 *     0  u32  magic "AXRK" (0x4b525841)
 *     4  u16  version (4); a reader refuses any other
 *     6  u16  flags, none defined: 0
 *     8  u32  size of the whole key, checksum included
 *    12  u16  number of owner workers (W)
 *    14  u16  number of domain entries (E)
 *    16  u64  owner's address of the range
 *    24  u64  length of the range (> 0)
 *    32  u64  token (names the mapping at its owner)
 *    40  u64  owner's host id (axon_sys_host_id)
 *    48  u64  owner process start time  } the owner's axon_proc_t
 *    56  u64  owner process ns id       }
 *    64  i32  owner pid                 }
 *    68  u32  reserved, 0
 *   workers: W x u64, the uuids of the owner's workers when packed
 *   entries: E x { u16 reserved (0), u16 key length L (<= AXON_MD_RKEY_MAX),
 *                  char[16] transport name, char[32] device name (both NUL padded),
 *                  L bytes of the rkey_pack output of that transport's memory domain
 *                  on that device, valid for every worker }
 *   (version 4 added the device: a context with two RDMA devices registers on
 *   both, and a key of one device means nothing to the other)
 *   u64 checksum: FNV-1a (axon_sys_hash64, seed 0) of every byte before it
 */
#ifndef AXON_RKEY_FORMAT_H
#define AXON_RKEY_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include "axon_status.h"
#include "component.h"
#include "proc.h"

#define AXON_RKEY_MAGIC        0x4b525841u  /* "AXRK" read little-endian */
#define AXON_RKEY_VERSION      4
#define AXON_RKEY_HDR_SIZE     72
#define AXON_RKEY_ENTRY_HDR    52
#define AXON_RKEY_ENTRY_DEV    (4 + AXON_TL_NAME_MAX)   /* the device name's offset */
#define AXON_RKEY_CSUM_SIZE    8
#define AXON_RKEY_MAX_WORKERS  0xffffu

/* The header, decoded. */
typedef struct axon_rkey_hdr {
    uint16_t    num_workers;
    uint16_t    num_entries;
    uint64_t    address;
    uint64_t    length;
    uint64_t    token;
    uint64_t    host_id;
    axon_proc_t owner;
} axon_rkey_hdr_t;

/*
 * Check every length and field of a packed key and decode its header:
 * AXON_ERR_IO_FORMAT (logged, naming the bad field) for anything else.
 */
axon_status_t axon_rkey_parse(const uint8_t *buf, size_t size, axon_rkey_hdr_t *hdr);
/* Does the key of hdr (parsed) name worker uuid as one of its owner's? */
int axon_rkey_has_worker(const uint8_t *buf, const axon_rkey_hdr_t *hdr, uint64_t uuid);
/*
 * The entry packed by transport tl_name's domain on device dev_name (NULL:
 * any device, the first) in a parsed key, or NULL; it serves the owner's
 * every worker (the caller checked the ep's peer is one).
 */
const uint8_t *axon_rkey_find_entry(const uint8_t *buf, const axon_rkey_hdr_t *hdr,
                                    const char *tl_name, const char *dev_name);
/* A walk over the entries of a parsed key. */
typedef struct axon_rkey_entry_iter {
    size_t   offset;
    unsigned index;
} axon_rkey_entry_iter_t;

void axon_rkey_entry_iter_init(const axon_rkey_hdr_t *hdr, axon_rkey_entry_iter_t *iter);
/* The next entry tl_name's domain packed, or NULL at the end. */
const uint8_t *axon_rkey_entry_next(const uint8_t *buf, const axon_rkey_hdr_t *hdr,
                                    const char *tl_name, axon_rkey_entry_iter_t *iter);
/* How many entries tl_name's domains packed (one per device). */
unsigned axon_rkey_count_entries(const uint8_t *buf, const axon_rkey_hdr_t *hdr,
                                 const char *tl_name);

#endif
