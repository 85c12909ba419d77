/* softib CM messages (softib_cm.h): made here, and checked here before a peer's is read. */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include "log.h"
#include "softib_cm.h"

void softib_cm_msg_init(softib_cm_msg_t *m, softib_cm_msg_type_t type)
{
    memset(m, 0, sizeof(*m));
    m->magic   = htonl(SOFTIB_CM_MAGIC);
    m->version = SOFTIB_CM_VERSION;
    m->type    = (uint8_t)type;
}

int softib_cm_msg_check(const softib_cm_msg_t *m)
{
    if ((ntohl(m->magic) != SOFTIB_CM_MAGIC) || (m->version != SOFTIB_CM_VERSION)) {
        axon_debug("softib cm: message of magic 0x%x version %u: not a softib CM peer",
                   ntohl(m->magic), m->version);
        return EPROTO;
    }
    if (m->pdata_len > AXON_DEV_CM_PDATA_MAX) {
        axon_debug("softib cm: message %u carries %u bytes of private data (at most %u)",
                   m->type, m->pdata_len, AXON_DEV_CM_PDATA_MAX);
        return EPROTO;
    }
    return 0;
}
