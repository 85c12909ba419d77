/*
 * Locality strings and topology sources: parsed here without hwloc, so
 * softib checks its AXON_SOFTIB_LOCALITY (in softib's libibverbs.so.1 too)
 * and builds with and without hwloc reject a malformed one the same way;
 * and a device's locality read from sysfs, which needs no hwloc either.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "topo.h"
#include "topo_parse.h"

int axon_topo_locality_parse(const char *str, axon_topo_locality_t *out)
{
    int end = -1;

    memset(out, 0, sizeof(*out));
    if (str[0] == '\0') {
        return 0;
    }
    if ((sscanf(str, "pci:%4x:%2x:%2x.%1x%n", &out->domain, &out->bus, &out->dev, &out->func,
                &end) == 4) && (end == (int)strlen(str)) && (out->dev < 32) &&
        (out->func < 8)) {
        out->kind = AXON_TOPO_AT_PCI;
        return 0;
    }
    end = -1;
    if ((strncmp(str, "numa:", 5) == 0) && (str[5] >= '0') && (str[5] <= '9') &&
        (sscanf(str, "numa:%u%n", &out->numa, &end) == 1) && (end == (int)strlen(str))) {
        out->kind = AXON_TOPO_AT_NUMA;
        return 0;
    }
    out->kind = AXON_TOPO_AT_UNKNOWN;
    return -1;
}

axon_status_t axon_topo_locality_check(const char *locality, const char *var_name)
{
    axon_topo_locality_t parsed;

    if (axon_topo_locality_parse(locality, &parsed) != 0) {
        axon_error("%s: locality '%s' is neither pci:DDDD:BB:DD.F (a PCI bus id) nor numa:N",
                   var_name, locality);
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

axon_status_t axon_topo_source_parse(const char *source, axon_topo_source_t *kind,
                                     const char **arg_p)
{
    if (source[0] == '\0') {
        *kind  = AXON_TOPO_SOURCE_HOST;
        *arg_p = source;
    } else if ((strncmp(source, "xml:", 4) == 0) && (source[4] != '\0')) {
        *kind  = AXON_TOPO_SOURCE_XML;
        *arg_p = source + 4;
    } else if ((strncmp(source, "synthetic:", 10) == 0) && (source[10] != '\0')) {
        *kind  = AXON_TOPO_SOURCE_SYNTHETIC;
        *arg_p = source + 10;
    } else {
        axon_error("AXON_TOPOLOGY: '%s' is neither empty (this host), xml:PATH nor "
                   "synthetic:DESCRIPTION", source);
        return AXON_ERR_INVALID_PARAM;
    }
    return AXON_OK;
}

void axon_topo_sysfs_locality(const char *sysfs_path, char *buf, size_t max)
{
    axon_topo_locality_t parsed;
    char link[PATH_MAX], at[AXON_TOPO_PCI_LOCALITY_LEN], *real, *part, *save;

    buf[0] = '\0';
    snprintf(link, sizeof(link), "%s/device", sysfs_path);
    real = realpath(link, NULL);
    if (real == NULL) {
        axon_debug("%s: no device link, locality unknown", sysfs_path);
        return;
    }
    /* The last PCI function on the way down: a virtio device sits below its own. */
    for (part = strtok_r(real, "/", &save); part != NULL; part = strtok_r(NULL, "/", &save)) {
        snprintf(at, sizeof(at), "pci:%s", part);
        if ((strlen(part) < sizeof(at) - 4) && (axon_topo_locality_parse(at, &parsed) == 0) &&
            (parsed.kind == AXON_TOPO_AT_PCI)) {
            snprintf(buf, max, "%s", at);
        }
    }
    if (buf[0] == '\0') {
        axon_debug("%s: not on a PCI function, locality unknown", sysfs_path);
    }
    free(real);
}
