/*
 * What peers hand the provider, checked here with no side effect (so the
 * fuzz harness and the callers judge it with the same code): a name given to
 * fi_av_insert, and a memory key blob fetched from a peer's address server,
 * written by axon_fi_mr_blob_write on the peer.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <string.h>
#include "axon_fi.h"

const char *axon_fi_name_invalid(const void *addr, axon_fi_name_t *name)
{
    if (addr == NULL) {
        return "address is NULL";
    }
    memcpy(name, addr, sizeof(*name));
    if (name->sin_family != AF_INET) {
        return "family is not AF_INET: not an axon name";
    }
    if ((name->sin_port == 0) || (name->sin_addr.s_addr == htonl(INADDR_ANY))) {
        return "names no server (null address or port)";
    }
    return NULL;
}

uint64_t axon_fi_name_id(const axon_fi_name_t *name)
{
    uint64_t id;

    memcpy(&id, name->sin_zero, sizeof(id));
    return le64toh(id);
}

size_t axon_fi_mr_blob_write(uint8_t *blob, const axon_fi_mr_blob_t *b)
{
    uint64_t be[2] = {htobe64(b->addend), htobe64(b->flags)};
    uint32_t wbe[2];
    size_t off = AXON_FI_MR_BLOB_HEAD;

    memcpy(blob, be, AXON_FI_MR_BLOB_HEAD);
    if (b->flags & AXON_FI_MR_BLOB_WORDS) {
        be[0]  = htobe64(b->word);
        wbe[0] = htobe32((uint32_t)b->words_key_len);
        wbe[1] = 0;
        memcpy(blob + off, be, sizeof(be[0]));
        memcpy(blob + off + 8, wbe, sizeof(wbe));
        memcpy(blob + off + AXON_FI_MR_BLOB_WORDS_HEAD, b->words_key, b->words_key_len);
        off += AXON_FI_MR_BLOB_WORDS_HEAD + b->words_key_len;
    }
    memcpy(blob + off, b->key, b->key_len);
    return off + b->key_len;
}

int axon_fi_mr_blob_parse(const uint8_t *blob, size_t len, axon_fi_mr_blob_t *b)
{
    uint64_t be[2];
    uint32_t be32;
    size_t off = AXON_FI_MR_BLOB_HEAD;

    if (len <= AXON_FI_MR_BLOB_HEAD) {   /* Axon's key follows the head */
        return -1;
    }
    memcpy(be, blob, sizeof(be));
    memset(b, 0, sizeof(*b));
    b->addend = be64toh(be[0]);
    b->flags  = be64toh(be[1]);
    if (b->flags & AXON_FI_MR_BLOB_WORDS) {
        if (len - off < AXON_FI_MR_BLOB_WORDS_HEAD) {
            return -1;
        }
        memcpy(&be[0], blob + off, sizeof(be[0]));
        memcpy(&be32, blob + off + 8, sizeof(be32));
        b->word          = be64toh(be[0]);
        b->words_key_len = be32toh(be32);
        off             += AXON_FI_MR_BLOB_WORDS_HEAD;
        if (len - off <= b->words_key_len) {   /* the region's own key follows */
            return -1;
        }
        b->words_key = blob + off;
        off         += b->words_key_len;
    }
    b->key     = blob + off;
    b->key_len = len - off;
    return 0;
}
