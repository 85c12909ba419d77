/*
 * Tag matching engine: the expected queue (posted receives) and the
 * unexpected queue (arrived messages no receive wanted yet).
 *
 * Receives with a full mask are hashed by tag; receives with a partial mask
 * (wildcards) sit in one list. Every receive carries a post sequence number,
 * so when a message matches both a hashed and a wildcard receive the earlier
 * posted one wins — MPI's ordering rule.
 * Unexpected messages are kept in arrival order in one list (for wildcard
 * receives) and in a hash bucket by tag (for full-mask receives).
 * The engine only links and unlinks; the caller owns the memory.
 */
#ifndef AXON_TAG_MATCH_H
#define AXON_TAG_MATCH_H

#include <stdint.h>
#include "axon.h"
#include "list.h"

typedef struct axon_tm_recv {
    axon_list_link_t link;      /* in a hash bucket or in the wildcard list */
    axon_tag_t       tag;
    axon_tag_t       tag_mask;
    uint64_t         sender;    /* the only sender it takes, or AXON_SENDER_ANY */
    uint64_t         seq;       /* post order */
} axon_tm_recv_t;

typedef struct axon_tm_unexp {
    axon_list_link_t all_link;     /* arrival order, every unexpected message */
    axon_list_link_t bucket_link;  /* arrival order within the tag's bucket */
    axon_tag_t       tag;
    uint64_t         sender;       /* the sending worker's id */
} axon_tm_unexp_t;

typedef struct axon_tag_match {
    unsigned          hash_mask;    /* buckets - 1 */
    axon_list_link_t *exp_hash;     /* full-mask receives */
    axon_list_link_t  exp_wild;     /* partial-mask receives */
    axon_list_link_t *unexp_hash;
    axon_list_link_t  unexp_all;
    uint64_t          next_seq;
    size_t            num_expected;
    size_t            num_unexpected;
} axon_tag_match_t;

/* hash_bits: log2 of the number of buckets (1..20). */
axon_status_t axon_tm_init(axon_tag_match_t *tm, unsigned hash_bits);
/* Unlinks nothing and frees only the buckets; the caller drains the queues first. */
void          axon_tm_cleanup(axon_tag_match_t *tm);

static inline int axon_tm_tag_matches(axon_tag_t msg_tag, axon_tag_t tag, axon_tag_t mask)
{
    return ((msg_tag ^ tag) & mask) == 0;
}

static inline int axon_tm_sender_matches(uint64_t msg_sender, uint64_t sender)
{
    return (sender == AXON_SENDER_ANY) || (sender == msg_sender);
}

/* Post a receive (tag, tag_mask, sender already set in recv); assigns its sequence number. */
void             axon_tm_post_recv(axon_tag_match_t *tm, axon_tm_recv_t *recv);
/* Unlink a posted receive (cancel). */
void             axon_tm_remove_recv(axon_tag_match_t *tm, axon_tm_recv_t *recv);
/* The earliest posted receive matching a message of msg_sender, unlinked; NULL if none. */
axon_tm_recv_t  *axon_tm_match_expected(axon_tag_match_t *tm, axon_tag_t msg_tag,
                                        uint64_t msg_sender);

/* Queue an arrived message (tag and sender set in unexp). */
void             axon_tm_add_unexpected(axon_tag_match_t *tm, axon_tm_unexp_t *unexp);
void             axon_tm_remove_unexpected(axon_tag_match_t *tm, axon_tm_unexp_t *unexp);
/*
 * The earliest arrived message matching (tag, tag_mask); unlinked if
 * remove != 0 (receive), left queued otherwise (probe). NULL if none.
 */
axon_tm_unexp_t *axon_tm_match_unexpected(axon_tag_match_t *tm, axon_tag_t tag,
                                          axon_tag_t tag_mask, uint64_t sender, int remove);

#endif
