/*
 * Fabric: one axon_context. Under the provider Axon must never use its own
 * ofi transport (it could open this provider again), so the context gets a
 * TLS override: the user's AXON_TLS without "ofi".
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "axon_fi.h"

#define AXON_FI_TLS_MAX 512

/*
 * AXON_TLS without ofi: unset/all -> "^ofi"; "^a,b" -> "^a,b,ofi"; "a,ofi,b"
 * -> "a,b". Returns 0 with *tls "" when nothing but ofi was asked for.
 */
static int axon_fi_tls_without_ofi(const char *user, char *tls, size_t max)
{
    char copy[AXON_FI_TLS_MAX], *tok, *save = NULL;
    size_t len = 0;

    if ((user == NULL) || (*user == '\0') || (strcmp(user, "all") == 0)) {
        snprintf(tls, max, "^ofi");
        return 0;
    }
    if (strlen(user) + 8 > sizeof(copy)) {
        AXON_FI_WARN(FI_LOG_FABRIC, "AXON_TLS '%s' is too long", user);
        return -FI_EINVAL;
    }
    if (user[0] == '^') {
        snprintf(tls, max, "%s,ofi", user);
        return 0;
    }
    strcpy(copy, user);
    tls[0] = '\0';
    for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "all") == 0) {
            snprintf(tls, max, "^ofi");
            return 0;
        }
        if (strcmp(tok, "ofi") == 0) {
            continue;
        }
        len += (size_t)snprintf(tls + len, (len < max) ? max - len : 0, "%s%s", len ? "," : "",
                                tok);
    }
    return 0;
}

static axon_status_t axon_fi_context_init(axon_context_h *context_p)
{
    const char *user = getenv("AXON_TLS");
    char tls[AXON_FI_TLS_MAX];
    axon_config_kv_t kv = {"TLS", tls};
    /* RMA and AMO: FI_RMA maps onto Axon's put/get, memory mapping and keys. */
    axon_context_params_t params = {AXON_FEATURE_TAG | AXON_FEATURE_RMA | AXON_FEATURE_AMO,
                                    &kv, 1};
    axon_status_t status;

    if (axon_fi_tls_without_ofi(user, tls, sizeof(tls)) != 0) {
        return AXON_ERR_INVALID_PARAM;
    }
    if (tls[0] == '\0') {
        AXON_FI_WARN(FI_LOG_FABRIC, "AXON_TLS=%s leaves no transport for the axon provider "
                     "(it never runs over Axon's ofi transport)", user);
        return AXON_ERR_NO_ELEM;
    }
    status = axon_init(&params, context_p);
    if ((status == AXON_ERR_INVALID_PARAM) && strstr(tls, "ofi")) {
        /* No ofi component in this installation: excluding it is not an option Axon knows. */
        AXON_FI_INFO(FI_LOG_FABRIC, "AXON_TLS=%s refused; retrying without excluding ofi", tls);
        params.config_count = ((user == NULL) || (*user == '\0')) ? 0 : 1;
        kv.value = user;
        status = axon_init(&params, context_p);
    }
    return status;
}

static int axon_fi_fabric_close(struct fid *fid)
{
    axon_fi_fabric_t *fabric = container_of(fid, axon_fi_fabric_t, fabric_fid.fid);

    if (fabric->refs > 0) {
        AXON_FI_WARN(FI_LOG_FABRIC, "fabric still has %d domains/EQs open", fabric->refs);
        return -FI_EBUSY;
    }
    axon_cleanup(fabric->context);
    pthread_mutex_destroy(&fabric->lock);
    free(fabric);
    return 0;
}

static struct fi_ops axon_fi_fabric_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = axon_fi_fabric_close,
    .bind     = axon_fi_no_bind,
    .control  = axon_fi_no_control,
    .ops_open = axon_fi_no_ops_open,
};

static int axon_fi_no_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
                                 struct fid_pep **pep, void *context)
{
    return -FI_ENOSYS;
}

static int axon_fi_no_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
                                struct fid_wait **waitset)
{
    return -FI_ENOSYS;
}

static int axon_fi_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
    return -FI_EAGAIN;   /* manual progress: the caller must keep reading */
}

static int axon_fi_domain2(struct fid_fabric *fabric, struct fi_info *info,
                           struct fid_domain **dom, uint64_t flags, void *context)
{
    if (flags != 0) {
        AXON_FI_WARN(FI_LOG_DOMAIN, "fi_domain2 flags 0x%llx not supported",
                     (unsigned long long)flags);
        return -FI_EINVAL;
    }
    return axon_fi_domain_open(fabric, info, dom, context);
}

static struct fi_ops_fabric axon_fi_fabric_ops = {
    .size       = sizeof(struct fi_ops_fabric),
    .domain     = axon_fi_domain_open,
    .passive_ep = axon_fi_no_passive_ep,
    .eq_open    = axon_fi_eq_open,
    .wait_open  = axon_fi_no_wait_open,
    .trywait    = axon_fi_trywait,
    .domain2    = axon_fi_domain2,
};

int axon_fi_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric_p,
                        void *context)
{
    axon_fi_fabric_t *fabric;
    axon_status_t status;

    if ((attr != NULL) && (attr->name != NULL) && strcmp(attr->name, AXON_FI_FABRIC_NAME)) {
        AXON_FI_WARN(FI_LOG_FABRIC, "unknown fabric name '%s'", attr->name);
        return -FI_ENODATA;
    }
    fabric = calloc(1, sizeof(*fabric));
    if (fabric == NULL) {
        return -FI_ENOMEM;
    }
    status = axon_fi_context_init(&fabric->context);
    if (status != AXON_OK) {
        AXON_FI_WARN(FI_LOG_FABRIC, "axon_init failed: %s", axon_status_string(status));
        free(fabric);
        return -axon_fi_errno(status);
    }
    pthread_mutex_init(&fabric->lock, NULL);
    fabric->fabric_fid.fid.fclass  = FI_CLASS_FABRIC;
    fabric->fabric_fid.fid.context = context;
    fabric->fabric_fid.fid.ops     = &axon_fi_fabric_fi_ops;
    fabric->fabric_fid.ops         = &axon_fi_fabric_ops;
    fabric->fabric_fid.api_version = (attr != NULL) ? attr->api_version : 0;
    *fabric_p = &fabric->fabric_fid;
    return 0;
}
