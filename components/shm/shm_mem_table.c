/*
 * The mapping table (mem_table.h): an Axon memfd segment (mem_seg.c does
 * the memfd, the sealing, the /proc attach and the identity check) whose
 * memory is a small header and AXON_MEM_TABLE_SLOTS slots. Owner and peers
 * touch slots only with atomic loads and stores: the owner writes while
 * peers read, from other processes.
 */
#include <string.h>
#include "log.h"
#include "shm_mem_table.h"
#include "sys.h"

#define AXON_MEM_TABLE_MAGIC   0x41584f4e4d544231ull  /* "AXONMTB1" */
#define AXON_MEM_TABLE_VERSION 1

/* At the start of the segment's memory; the slots follow. */
typedef struct axon_mem_table_hdr {
    uint64_t magic;       /* tells a table from an allocated segment of user data */
    uint32_t version;
    uint32_t num_slots;
    uint64_t id;
    uint64_t reserved[5];
} axon_mem_table_hdr_t;

_Static_assert(sizeof(axon_mem_table_hdr_t) == 64, "table header is one cache line");
_Static_assert(sizeof(axon_mem_table_slot_t) == 32, "two slots per cache line");

#define AXON_MEM_TABLE_LENGTH \
    (sizeof(axon_mem_table_hdr_t) + AXON_MEM_TABLE_SLOTS * sizeof(axon_mem_table_slot_t))

static void axon_mem_table_set(axon_mem_table_t *table, uint64_t id)
{
    table->slots = (axon_mem_table_slot_t *)((uint8_t *)table->seg.address +
                                             sizeof(axon_mem_table_hdr_t));
    table->id    = id;
}

axon_status_t axon_mem_table_create(axon_mem_table_t *table)
{
    axon_mem_table_hdr_t *hdr;
    axon_status_t status;
    uint64_t id;

    memset(table, 0, sizeof(*table));
    do {
        id = axon_sys_generate_uuid();
    } while (id == 0);
    status = axon_mem_seg_alloc(AXON_MEM_TABLE_LENGTH, id, &table->seg);
    if (status != AXON_OK) {
        return status;
    }
    hdr            = table->seg.address;   /* zeroed: every slot is free */
    hdr->version   = AXON_MEM_TABLE_VERSION;
    hdr->num_slots = AXON_MEM_TABLE_SLOTS;
    hdr->id        = id;
    __atomic_store_n(&hdr->magic, AXON_MEM_TABLE_MAGIC, __ATOMIC_RELEASE);
    axon_mem_table_set(table, id);
    axon_debug("mapping table %016llx: fd %d, %d slots", (unsigned long long)id,
               table->seg.fd, AXON_MEM_TABLE_SLOTS);
    return AXON_OK;
}

void axon_mem_table_destroy(axon_mem_table_t *table)
{
    uint32_t i;

    if (table->slots == NULL) {
        return;
    }
    /* Peers keep their mapping of it: they must find nothing live there. */
    for (i = 0; i < AXON_MEM_TABLE_SLOTS; ++i) {
        axon_mem_table_clear(table, i);
    }
    axon_mem_seg_free(&table->seg);
    memset(table, 0, sizeof(*table));
}

int axon_mem_table_publish(axon_mem_table_t *table, uint64_t token, uint64_t base,
                           uint64_t length, uint64_t layout)
{
    axon_mem_table_slot_t *slot;
    uint32_t idx;

    for (idx = 0; idx < AXON_MEM_TABLE_SLOTS; ++idx) {
        slot = &table->slots[idx];
        if (__atomic_load_n(&slot->token, __ATOMIC_RELAXED) != 0) {
            continue;
        }
        /*
         * The fence orders the clearing of the slot's last token before the
         * new range: a peer that reads the new range then sees that token
         * gone (axon_mem_table_check reads the token again after the range).
         */
        __atomic_thread_fence(__ATOMIC_RELEASE);
        __atomic_store_n(&slot->base, base, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->length, length, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->layout, layout, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->token, token, __ATOMIC_RELEASE);
        return (int)idx;
    }
    axon_debug("mapping table %016llx is full (%d slots): 0x%llx (%llu bytes) is reached by "
               "active messages only", (unsigned long long)table->id, AXON_MEM_TABLE_SLOTS,
               (unsigned long long)base, (unsigned long long)length);
    return -1;
}

void axon_mem_table_clear(axon_mem_table_t *table, uint32_t slot)
{
    /* Sequentially consistent: ordered before whatever releases the memory next. */
    __atomic_store_n(&table->slots[slot].token, 0, __ATOMIC_SEQ_CST);
}

axon_status_t axon_mem_table_attach(const axon_proc_t *owner, int32_t fd, uint64_t id,
                                    axon_mem_table_t *table)
{
    const axon_mem_table_hdr_t *hdr;
    axon_status_t status;

    memset(table, 0, sizeof(*table));
    status = axon_mem_seg_attach(owner, fd, AXON_MEM_TABLE_LENGTH, id, &table->seg);
    if (status != AXON_OK) {
        return status;
    }
    hdr = table->seg.address;
    if ((__atomic_load_n(&hdr->magic, __ATOMIC_ACQUIRE) != AXON_MEM_TABLE_MAGIC) ||
        (hdr->version != AXON_MEM_TABLE_VERSION) || (hdr->num_slots != AXON_MEM_TABLE_SLOTS) ||
        (hdr->id != id)) {
        axon_error("segment fd %d of pid %d is not mapping table %016llx (magic 0x%llx, "
                   "version %u, %u slots)", (int)fd, (int)owner->pid, (unsigned long long)id,
                   (unsigned long long)hdr->magic, hdr->version, hdr->num_slots);
        axon_mem_seg_detach(&table->seg);
        return AXON_ERR_REMOTE_ACCESS;
    }
    axon_mem_table_set(table, id);
    return AXON_OK;
}

void axon_mem_table_detach(axon_mem_table_t *table)
{
    axon_mem_seg_detach(&table->seg);
    memset(table, 0, sizeof(*table));
}

const axon_mem_table_slot_t *axon_mem_table_check(const axon_mem_table_t *table, uint32_t slot,
                                                  uint64_t token, uint64_t base, uint64_t length)
{
    const axon_mem_table_slot_t *s;
    uint64_t b, l;

    if ((slot >= AXON_MEM_TABLE_SLOTS) || (token == 0)) {
        return NULL;
    }
    s = &table->slots[slot];
    if (__atomic_load_n(&s->token, __ATOMIC_ACQUIRE) != token) {
        return NULL;
    }
    b = __atomic_load_n(&s->base, __ATOMIC_RELAXED);
    l = __atomic_load_n(&s->length, __ATOMIC_RELAXED);
    /* Still the same token: the range read belongs to it (see publish). */
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&s->token, __ATOMIC_RELAXED) != token) {
        return NULL;
    }
    return ((b == base) && (l == length)) ? s : NULL;
}
