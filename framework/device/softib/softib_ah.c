/* Address handles: where a UD send goes. The link layer is Ethernet, so a GRH is required. */
#include <errno.h>
#include <stdlib.h>
#include "log.h"
#include "softib.h"

/* Shared with the QP's AV check at RTR: is_global, port 1, GID index 0 */
int softib_ah_attr_check(const char *what, const axon_dev_ah_attr_t *attr)
{
    if (!attr->is_global) {
        axon_error("softib: %s: is_global=0, but the link layer is Ethernet (a GRH is required)",
                   what);
        return EINVAL;
    }
    if ((attr->port_num != SOFTIB_PORT_NUM) && (attr->port_num != 0)) {
        axon_error("softib: %s: port_num %u (softib has port 1 only)", what, attr->port_num);
        return EINVAL;
    }
    if (attr->grh.sgid_index != 0) {
        axon_error("softib: %s: sgid_index %u (only GID index 0 exists)", what,
                   attr->grh.sgid_index);
        return EINVAL;
    }
    return 0;
}

int softib_create_ah(axon_dev_pd_t *pd, axon_dev_ah_attr_t *attr, axon_dev_ah_t **ah_p)
{
    softib_dev_t *dev = softib_dev(pd->context);
    softib_ah_t *ah;

    if ((attr == NULL) || softib_ah_attr_check("create_ah", attr)) {
        return EINVAL;
    }
    ah = calloc(1, sizeof(*ah));
    if (ah == NULL) {
        axon_error("softib: no memory for an AH");
        return ENOMEM;
    }
    ah->super.context = pd->context;
    ah->super.pd      = pd;
    ah->attr          = *attr;
    pthread_mutex_lock(&dev->lock);
    softib_pd(pd)->refcnt++;
    pthread_mutex_unlock(&dev->lock);
    *ah_p = &ah->super;
    return 0;
}

int softib_destroy_ah(axon_dev_ah_t *ah)
{
    softib_dev_t *dev = softib_dev(ah->context);

    pthread_mutex_lock(&dev->lock);
    softib_pd(ah->pd)->refcnt--;
    pthread_mutex_unlock(&dev->lock);
    free(ah);
    return 0;
}
