/* Tag matching engine: see tag_match.h for the ordering rules. */
#include <stdlib.h>
#include "tag_match.h"
#include "log.h"

static inline unsigned axon_tm_bucket(const axon_tag_match_t *tm, axon_tag_t tag)
{
    /* Fibonacci hashing: MPI tags put rank and user tag in different bit
     * ranges, so mix all 64 bits before taking the low ones. */
    return (unsigned)((tag * 0x9E3779B97F4A7C15ull) >> 32) & tm->hash_mask;
}

axon_status_t axon_tm_init(axon_tag_match_t *tm, unsigned hash_bits)
{
    unsigned i, buckets;

    if ((hash_bits < 1) || (hash_bits > 20)) {
        axon_error("tag match hash bits %u out of range [1, 20]", hash_bits);
        return AXON_ERR_INVALID_PARAM;
    }

    buckets        = 1u << hash_bits;
    tm->hash_mask  = buckets - 1;
    tm->exp_hash   = malloc(sizeof(*tm->exp_hash) * buckets);
    tm->unexp_hash = malloc(sizeof(*tm->unexp_hash) * buckets);
    if ((tm->exp_hash == NULL) || (tm->unexp_hash == NULL)) {
        free(tm->exp_hash);
        free(tm->unexp_hash);
        axon_error("failed to allocate %u tag match buckets", buckets);
        return AXON_ERR_NO_MEMORY;
    }

    for (i = 0; i < buckets; ++i) {
        axon_list_init(&tm->exp_hash[i]);
        axon_list_init(&tm->unexp_hash[i]);
    }
    axon_list_init(&tm->exp_wild);
    axon_list_init(&tm->unexp_all);
    tm->next_seq       = 0;
    tm->num_expected   = 0;
    tm->num_unexpected = 0;
    return AXON_OK;
}

void axon_tm_cleanup(axon_tag_match_t *tm)
{
    free(tm->exp_hash);
    free(tm->unexp_hash);
    tm->exp_hash = tm->unexp_hash = NULL;
}

void axon_tm_post_recv(axon_tag_match_t *tm, axon_tm_recv_t *recv)
{
    recv->seq = tm->next_seq++;
    if (recv->tag_mask == AXON_TAG_MASK_FULL) {
        axon_list_add_tail(&tm->exp_hash[axon_tm_bucket(tm, recv->tag)], &recv->link);
    } else {
        axon_list_add_tail(&tm->exp_wild, &recv->link);
    }
    ++tm->num_expected;
}

void axon_tm_remove_recv(axon_tag_match_t *tm, axon_tm_recv_t *recv)
{
    axon_list_del(&recv->link);
    --tm->num_expected;
}

/* First receive in post order within one list that matches the message. */
static inline axon_tm_recv_t *axon_tm_search_list(axon_list_link_t *head, axon_tag_t msg_tag,
                                                  uint64_t msg_sender)
{
    axon_tm_recv_t *recv;

    axon_list_for_each(recv, head, link) {
        if (axon_tm_tag_matches(msg_tag, recv->tag, recv->tag_mask) &&
            axon_tm_sender_matches(msg_sender, recv->sender)) {
            return recv;
        }
    }
    return NULL;
}

axon_tm_recv_t *axon_tm_match_expected(axon_tag_match_t *tm, axon_tag_t msg_tag,
                                       uint64_t msg_sender)
{
    axon_tm_recv_t *hashed, *wild, *found;

    if (tm->num_expected == 0) {
        return NULL;
    }

    hashed = axon_tm_search_list(&tm->exp_hash[axon_tm_bucket(tm, msg_tag)], msg_tag,
                                 msg_sender);
    wild   = axon_list_is_empty(&tm->exp_wild) ? NULL :
             axon_tm_search_list(&tm->exp_wild, msg_tag, msg_sender);

    if (hashed == NULL) {
        found = wild;
    } else if ((wild == NULL) || (hashed->seq < wild->seq)) {
        found = hashed;
    } else {
        found = wild;
    }

    if (found != NULL) {
        axon_tm_remove_recv(tm, found);
    }
    return found;
}

void axon_tm_add_unexpected(axon_tag_match_t *tm, axon_tm_unexp_t *unexp)
{
    axon_list_add_tail(&tm->unexp_all, &unexp->all_link);
    axon_list_add_tail(&tm->unexp_hash[axon_tm_bucket(tm, unexp->tag)], &unexp->bucket_link);
    ++tm->num_unexpected;
}

void axon_tm_remove_unexpected(axon_tag_match_t *tm, axon_tm_unexp_t *unexp)
{
    axon_list_del(&unexp->all_link);
    axon_list_del(&unexp->bucket_link);
    --tm->num_unexpected;
}

axon_tm_unexp_t *axon_tm_match_unexpected(axon_tag_match_t *tm, axon_tag_t tag,
                                          axon_tag_t tag_mask, uint64_t sender, int remove)
{
    axon_tm_unexp_t *unexp, *found = NULL;

    if (tm->num_unexpected == 0) {
        return NULL;
    }

    if (tag_mask == AXON_TAG_MASK_FULL) {
        /* The bucket keeps arrival order, and only this bucket can hold tag. */
        axon_list_for_each(unexp, &tm->unexp_hash[axon_tm_bucket(tm, tag)], bucket_link) {
            if ((unexp->tag == tag) && axon_tm_sender_matches(unexp->sender, sender)) {
                found = unexp;
                break;
            }
        }
    } else {
        axon_list_for_each(unexp, &tm->unexp_all, all_link) {
            if (axon_tm_tag_matches(unexp->tag, tag, tag_mask) &&
                axon_tm_sender_matches(unexp->sender, sender)) {
                found = unexp;
                break;
            }
        }
    }

    if ((found != NULL) && remove) {
        axon_tm_remove_unexpected(tm, found);
    }
    return found;
}
