/*
 * RMA keys on the initiator: a libfabric key is 64 bits, Axon's packed key
 * 100+ bytes, so the first operation with (peer, key) asks the peer's
 * address server for it (one TCP exchange, answered from the target
 * domain's table without the target progressing), unpacks it on the
 * connection's Axon endpoint and caches it on the connection. Later
 * operations find it with one map lookup. A key found stale (the target
 * closed the region: Axon says AXON_ERR_REMOTE_ACCESS) is forgotten, so a
 * region registered again under the same key is found by the next use;
 * the forgotten Axon key stays on the connection's list, since operations
 * in flight may still hold it, and is destroyed with the connection.
 * FI_RMA_EVENT: the key may also give the region's event words at the peer
 * endpoint (axon_fi_event_words.c); their Axon key, the same for every
 * region of the endpoint, is unpacked once per connection.
 */
#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include "axon_fi.h"

/* Where the key's memory is mapped for good (a peer's on this host), for the direct path. */
static void axon_fi_rkey_window(axon_fi_rkey_t *rkey)
{
    uint64_t lo;
    size_t   len;
    void    *ptr;

    if (axon_rkey_map_window(rkey->rkey, &lo, &len, &ptr) == AXON_OK) {
        rkey->win_lo  = lo - rkey->addend;   /* modulo 2^64, as the addend is */
        rkey->win_len = len;
        rkey->win_ptr = ptr;
    }
}

axon_status_t axon_fi_rkey_resolve(axon_fi_conn_t *conn, uint64_t key, axon_fi_rkey_t **rkey_p)
{
    axon_fi_peer_t *peer = conn->peer;
    axon_fi_name_t name;
    axon_fi_mr_blob_t parsed;
    axon_fi_rkey_t *rkey;
    axon_status_t status;
    void *blob = NULL;
    size_t len = 0;
    char str[96];
    int ret;

    axon_fi_name_make(peer->name.sin_addr, peer->name.sin_port, peer->id, &name);
    axon_fi_name_str(&name, str, sizeof(str));
    ret = axon_fi_addr_fetch_key(&name, key, &blob, &len);
    if ((ret == 0) && (axon_fi_mr_blob_parse(blob, len, &parsed) != 0)) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "RMA key %llu of %s: %zu bytes are not a key blob",
                     (unsigned long long)key, str, len);
        free(blob);
        return AXON_ERR_IO_FORMAT;
    }
    if (ret != 0) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "RMA key %llu of %s: %s", (unsigned long long)key, str,
                     (ret == -FI_ENOKEY) ? "no region registered for remote access under it" :
                     fi_strerror(-ret));
        return (ret == -FI_ENOKEY) ? AXON_ERR_REMOTE_ACCESS : AXON_ERR_UNREACHABLE;
    }
    rkey = calloc(1, sizeof(*rkey));
    if (rkey == NULL) {
        free(blob);
        return AXON_ERR_NO_MEMORY;
    }
    rkey->addend = parsed.addend;
    rkey->events = (parsed.flags & AXON_FI_MR_BLOB_EVENTS) != 0;
    if (parsed.flags & AXON_FI_MR_BLOB_WORDS) {
        axon_fi_event_words_unpack(conn, &parsed, rkey);
    }
    status = axon_ep_rkey_unpack(conn->aep, parsed.key, parsed.key_len, &rkey->rkey);
    free(blob);
    if (status != AXON_OK) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "RMA key %llu of %s: axon_ep_rkey_unpack failed: %s",
                     (unsigned long long)key, str, axon_status_string(status));
        free(rkey);
        return status;
    }
    if (axon_fi_map_put(&conn->rkeys, key + 1, (uintptr_t)rkey) != 0) {
        axon_rkey_destroy(rkey->rkey);
        free(rkey);
        return AXON_ERR_NO_MEMORY;
    }
    axon_fi_rkey_window(rkey);
    rkey->next      = conn->all_rkeys;
    conn->all_rkeys = rkey;
    *rkey_p = rkey;
    return AXON_OK;
}

void axon_fi_rkey_forget(axon_fi_ep_t *ep, fi_addr_t addr, uint64_t key)
{
    axon_fi_conn_t *conn = axon_fi_conn_find(ep, addr);

    if (conn != NULL) {
        axon_fi_map_del(&conn->rkeys, key + 1);
        if (conn->last_key == key + 1) {
            conn->last_key = 0;
        }
    }
}

void axon_fi_rkey_destroy_all(axon_fi_conn_t *conn)
{
    axon_fi_rkey_t *rkey;

    while ((rkey = conn->all_rkeys) != NULL) {
        conn->all_rkeys = rkey->next;
        axon_rkey_destroy(rkey->rkey);
        free(rkey);
    }
    if (conn->words != NULL) {
        axon_rkey_destroy(conn->words);
        conn->words = NULL;
    }
    axon_fi_map_free(&conn->rkeys);
    conn->last_key = 0;
}
