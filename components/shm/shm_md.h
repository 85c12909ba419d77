/*
 * shm's memory domain (shm_md.c): what it keeps for memory mapped here and
 * for peers' keys unpacked here. The key entry's layout is in shm_md.c.
 */
#ifndef AXON_SHM_MD_H
#define AXON_SHM_MD_H

#include <pthread.h>
#include "component.h"
#include "list.h"
#include "shm_mem_table.h"

#define AXON_SHM_KEY_VERSION        1
#define AXON_SHM_KEY_FLAG_ALLOCATED 0x1u
#define AXON_SHM_KEY_FLAG_SLOT      0x2u
#define AXON_SHM_KEY_FLAG_SHARED    0x4u   /* the caller's memory, its whole pages shared */
#define AXON_SHM_KEY_FLAG_HEAD      0x8u   /* SHARED: and the partial first page */
#define AXON_SHM_KEY_FLAG_TAIL      0x10u  /* SHARED: and the partial last page */
#define AXON_SHM_KEY_SIZE           32

typedef struct axon_shm_md {
    axon_md_t        super;
    int              cma;          /* peers' memory by cross-memory attach (AXON_SHM_CMA) */
    size_t           layout_cma_min; /* AXON_SHM_LAYOUT_CMA_MIN: smaller mean pieces by AM */
    pthread_mutex_t  lock;
    axon_mem_table_t table;        /* ours, created at the first registration */
    int              table_state;  /* 0: not yet, 1: created, -1: failed */
    axon_list_link_t segs;         /* peers' segments our keys attached */
    axon_list_link_t tables;       /* peers' tables our keys attached */
} axon_shm_md_t;

/*
 * A layout key's pieces, kept in the owner's memory while it is mapped: its
 * slot's layout field holds the address, and a peer reads it once, at
 * unpack, by cross-memory attach. Packed byte k of [base, base + size) is
 * in entry i of repetition r as component.h's axon_md_layout_t says.
 */
typedef struct axon_shm_layout_desc {
    uint64_t               base;
    uint64_t               size;
    uint64_t               repeat;
    uint64_t               num_entries;
    axon_md_layout_entry_t entries[];
} axon_shm_layout_desc_t;

/* Most entries a peer takes from a layout key (what it reads at unpack). */
#define AXON_SHM_LAYOUT_MAX_ENTRIES (1u << 22)

/* A peer's copy of a layout key's pieces, with where each entry starts. */
typedef struct axon_shm_layout {
    uint64_t                      base;
    uint64_t                      size;
    uint64_t                      repeat;
    uint64_t                      block;    /* packed bytes of one repetition */
    uint32_t                      num;
    const axon_md_layout_entry_t *entries;  /* in the same allocation */
    const uint64_t               *starts;   /* entry i's first byte in a repetition; num + 1 */
} axon_shm_layout_t;

/* A registration: memory we allocated or the caller's, and its slot. */
typedef struct axon_shm_memh {
    axon_mem_seg_t seg;            /* allocated or shared: seg.base != NULL */
    int            shared;         /* seg holds the caller's pages (AXON_MEM_MAP_SHARED) */
    axon_shm_layout_desc_t *layout; /* a layout key's pieces, or NULL */
    uint64_t       id;             /* names it in the segment and the slot */
    uint64_t       address;
    uint64_t       length;
    int32_t        slot;           /* -1: not published */
} axon_shm_memh_t;

/* A key entry, decoded. */
typedef struct axon_shm_key {
    uint8_t  flags;
    uint16_t slot;
    int32_t  memfd;
    int32_t  table_fd;
    uint64_t table_id;
    uint64_t id;
} axon_shm_key_t;

/* A peer's segment or table attached here, shared by every key naming it. */
typedef struct axon_shm_attach {
    axon_list_link_t link;         /* in the domain's segs or tables */
    axon_proc_t      owner;
    int32_t          fd;
    uint64_t         id;           /* segment: its token; table: its id */
    uint64_t         length;       /* segment only */
    unsigned         refcount;
    union {
        axon_mem_seg_t   seg;
        axon_mem_table_t table;
    };
} axon_shm_attach_t;

/* What a key unpacked here holds. */
typedef struct axon_shm_rkey_handle {
    axon_shm_attach_t *seg;
    axon_shm_attach_t *table;
    axon_shm_layout_t *layout;     /* a layout key's pieces, read from the owner */
} axon_shm_rkey_handle_t;

#endif
