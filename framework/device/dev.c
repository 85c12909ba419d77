/*
 * The device layer's front: which back ends exist, the device list across
 * them, opening a device by name, and the strings of the verbs enums.
 * Everything else is a direct call through the opened device's ops table.
 */
#include "axon_config.h"
#include "dev_backend.h"
#include "dev_cm_backend.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const axon_dev_backend_t *axon_dev_backends[AXON_DEV_MAX_BACKENDS + 1];

_Static_assert(AXON_DEV_MAX_BACKENDS <= AXON_DEV_CM_MAX_BACKENDS,
               "a connection-manager channel has room for every back end");

/* Called from constructors, before any thread or any list: no lock. */
void axon_dev_backend_register(const axon_dev_backend_t *be)
{
    int i, n;

    for (n = 0; axon_dev_backends[n] != NULL; ++n) {
    }
    if (n == AXON_DEV_MAX_BACKENDS) {
        axon_error("device layer: no room for back end '%s' (%d at most)", be->name, n);
        return;
    }
    for (i = n; (i > 0) && (axon_dev_backends[i - 1]->order > be->order); --i) {
        axon_dev_backends[i] = axon_dev_backends[i - 1];
    }
    axon_dev_backends[i] = be;
    for (i = n = 0; axon_dev_backends[i] != NULL; ++i) {
        if (axon_dev_backends[i]->cm != NULL) {
            axon_dev_cm_backends[n++] = axon_dev_backends[i]->cm;
        }
    }
}

const char *const axon_dev_cap_names[] = {
    "rc", "uc", "ud", "srq", "atomic", "inline", "comp_channel",
    "dc", "ext_atomic", "umr", "cross_channel", "mcast",
    NULL
};

_Static_assert(sizeof(axon_dev_cap_names) / sizeof(axon_dev_cap_names[0]) ==
               AXON_DEV_CAP_LAST_BIT + 1, "one name per AXON_DEV_CAP_* bit");

/* Initial room of the device list; it grows when a back end reports more. */
#define AXON_DEV_LIST_INIT 8

/* Ask one back end, growing the array until its devices fit. */
static axon_status_t axon_dev_list_add(const axon_dev_backend_t *be, axon_dev_info_t **list_p,
                                       int *count_p, int *max_p)
{
    axon_dev_info_t *list;
    int n, max;

    for (;;) {
        n = be->get_list(*list_p + *count_p, *max_p - *count_p);
        if (n < 0) {
            /* A back end that cannot list its devices must not hide the others. */
            axon_debug("device back end %s: cannot list devices: %s", be->name, strerror(-n));
            return AXON_OK;
        }
        if (n <= *max_p - *count_p) {
            *count_p += n;
            return AXON_OK;
        }
        max  = *count_p + n;
        list = realloc(*list_p, (size_t)max * sizeof(*list));
        if (list == NULL) {
            axon_error("device list: cannot allocate %d entries", max);
            return AXON_ERR_NO_MEMORY;
        }
        *list_p = list;
        *max_p  = max;
    }
}

axon_status_t axon_dev_get_list(axon_dev_info_t **list_p, int *count_p)
{
    const axon_dev_backend_t *const *be;
    axon_dev_info_t *list;
    axon_status_t status;
    int count = 0, max = AXON_DEV_LIST_INIT;

    if ((list_p == NULL) || (count_p == NULL)) {
        axon_error("axon_dev_get_list: NULL %s", (list_p == NULL) ? "list_p" : "count_p");
        return AXON_ERR_INVALID_PARAM;
    }
    list = malloc((size_t)max * sizeof(*list));
    if (list == NULL) {
        axon_error("device list: cannot allocate %d entries", max);
        return AXON_ERR_NO_MEMORY;
    }
    for (be = axon_dev_backends; *be != NULL; ++be) {
        status = axon_dev_list_add(*be, &list, &count, &max);
        if (status != AXON_OK) {
            free(list);
            return status;
        }
    }
    *list_p  = list;
    *count_p = count;
    return AXON_OK;
}

void axon_dev_free_list(axon_dev_info_t *list)
{
    free(list);
}

void axon_dev_report_backends(axon_dev_report_cb_t cb, void *arg)
{
    const axon_dev_backend_t *const *be;
    char summary[256];

    for (be = axon_dev_backends; *be != NULL; ++be) {
        summary[0] = '\0';
        (*be)->summary(summary, sizeof(summary));
        cb((*be)->name, summary, arg);
    }
}

/* "softib0, softib1" or "none" into buf, for the error of a failed open. */
static void axon_dev_names_format(char *buf, size_t max)
{
    axon_dev_info_t *list;
    size_t len = 0;
    int count, i;

    snprintf(buf, max, "none");
    if ((axon_dev_get_list(&list, &count) != AXON_OK)) {
        return;
    }
    for (i = 0; (i < count) && (len < max); ++i) {
        len += (size_t)snprintf(buf + len, max - len, "%s%s", (i == 0) ? "" : ", ",
                                list[i].name);
    }
    axon_dev_free_list(list);
}

int axon_dev_open(const char *name, axon_dev_context_t **ctx_p)
{
    const axon_dev_backend_t *const *be;
    char names[512];
    int ret;

    if ((name == NULL) || (ctx_p == NULL)) {
        axon_error("axon_dev_open: NULL %s", (name == NULL) ? "device name" : "ctx_p");
        return EINVAL;
    }
    for (be = axon_dev_backends; *be != NULL; ++be) {
        ret = (*be)->open(name, ctx_p);
        if (ret != ENODEV) {
            return ret;   /* opened, or ours but failed (the back end logged why) */
        }
    }
    axon_dev_names_format(names, sizeof(names));
    axon_error("no RDMA device named '%s' (devices: %s)", name, names);
    return ENODEV;
}

/* ------------------------------------------------------------ enum strings */

/* Wording of ibv_wc_status_str(3), so logs read the same on both back ends. */
static const char *const axon_dev_wc_status_strs[] = {
    [AXON_DEV_WC_SUCCESS]            = "success",
    [AXON_DEV_WC_LOC_LEN_ERR]        = "local length error",
    [AXON_DEV_WC_LOC_QP_OP_ERR]      = "local QP operation error",
    [AXON_DEV_WC_LOC_EEC_OP_ERR]     = "local EE context operation error",
    [AXON_DEV_WC_LOC_PROT_ERR]       = "local protection error",
    [AXON_DEV_WC_WR_FLUSH_ERR]       = "Work Request Flushed Error",
    [AXON_DEV_WC_MW_BIND_ERR]        = "memory management operation error",
    [AXON_DEV_WC_BAD_RESP_ERR]       = "bad response error",
    [AXON_DEV_WC_LOC_ACCESS_ERR]     = "local access error",
    [AXON_DEV_WC_REM_INV_REQ_ERR]    = "remote invalid request error",
    [AXON_DEV_WC_REM_ACCESS_ERR]     = "remote access error",
    [AXON_DEV_WC_REM_OP_ERR]         = "remote operation error",
    [AXON_DEV_WC_RETRY_EXC_ERR]      = "transport retry counter exceeded",
    [AXON_DEV_WC_RNR_RETRY_EXC_ERR]  = "RNR retry counter exceeded",
    [AXON_DEV_WC_LOC_RDD_VIOL_ERR]   = "local RDD violation error",
    [AXON_DEV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
    [AXON_DEV_WC_REM_ABORT_ERR]      = "aborted error",
    [AXON_DEV_WC_INV_EECN_ERR]       = "invalid EE context number",
    [AXON_DEV_WC_INV_EEC_STATE_ERR]  = "invalid EE context state",
    [AXON_DEV_WC_FATAL_ERR]          = "fatal error",
    [AXON_DEV_WC_RESP_TIMEOUT_ERR]   = "response timeout error",
    [AXON_DEV_WC_GENERAL_ERR]        = "general error",
};

/* Wording of ibv_event_type_str(3). */
static const char *const axon_dev_event_type_strs[] = {
    [AXON_DEV_EVENT_CQ_ERR]              = "CQ error",
    [AXON_DEV_EVENT_QP_FATAL]            = "local work queue catastrophic error",
    [AXON_DEV_EVENT_QP_REQ_ERR]          = "invalid request local work queue error",
    [AXON_DEV_EVENT_QP_ACCESS_ERR]       = "local access violation work queue error",
    [AXON_DEV_EVENT_COMM_EST]            = "communication established",
    [AXON_DEV_EVENT_SQ_DRAINED]          = "send queue drained",
    [AXON_DEV_EVENT_PATH_MIG]            = "path migrated",
    [AXON_DEV_EVENT_PATH_MIG_ERR]        = "path migration request error",
    [AXON_DEV_EVENT_DEVICE_FATAL]        = "local catastrophic error",
    [AXON_DEV_EVENT_PORT_ACTIVE]         = "port active",
    [AXON_DEV_EVENT_PORT_ERR]            = "port error",
    [AXON_DEV_EVENT_LID_CHANGE]          = "LID change",
    [AXON_DEV_EVENT_PKEY_CHANGE]         = "P_Key change",
    [AXON_DEV_EVENT_SM_CHANGE]           = "SM change",
    [AXON_DEV_EVENT_SRQ_ERR]             = "SRQ catastrophic error",
    [AXON_DEV_EVENT_SRQ_LIMIT_REACHED]   = "SRQ limit reached",
    [AXON_DEV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
    [AXON_DEV_EVENT_CLIENT_REREGISTER]   = "client reregistration",
    [AXON_DEV_EVENT_GID_CHANGE]          = "GID table change",
    [AXON_DEV_EVENT_DCT_KEY_VIOLATION]   = "DCT key violation",
    [AXON_DEV_EVENT_DCT_ACCESS_ERR]      = "DCT access error",
    [AXON_DEV_EVENT_DCT_REQ_ERR]         = "DCT invalid request error",
};

#define AXON_DEV_ARRAY_LEN(_a) (sizeof(_a) / sizeof((_a)[0]))

/* An out-of-range value is a caller bug or a newer device: say so, never index past. */
static const char *axon_dev_enum_str(const char *const *strs, size_t count, unsigned value)
{
    return ((value < count) && (strs[value] != NULL)) ? strs[value] : "unknown";
}

const char *axon_dev_wc_status_str(axon_dev_wc_status_t status)
{
    return axon_dev_enum_str(axon_dev_wc_status_strs, AXON_DEV_ARRAY_LEN(axon_dev_wc_status_strs),
                             (unsigned)status);
}

const char *axon_dev_event_type_str(axon_dev_event_type_t type)
{
    return axon_dev_enum_str(axon_dev_event_type_strs,
                             AXON_DEV_ARRAY_LEN(axon_dev_event_type_strs), (unsigned)type);
}
