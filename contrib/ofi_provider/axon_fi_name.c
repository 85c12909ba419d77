/*
 * Endpoint names: a struct sockaddr_in (FI_SOCKADDR_IN) giving the address
 * server that hands out the endpoint's worker address, with the worker's id
 * in sin_zero (little-endian). Being sockaddr-compatible, what fi_getinfo
 * makes of node/service is a name too: the same address with id 0, "the
 * endpoint served there", which a client inserts without asking anyone.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include "axon_fi.h"

int axon_fi_name_check(const void *addr, axon_fi_name_t *name)
{
    const char *why = axon_fi_name_invalid(addr, name);
    char str[96];

    if (why != NULL) {
        if (addr != NULL) {
            axon_fi_name_str(name, str, sizeof(str));
        }
        AXON_FI_WARN(FI_LOG_AV, "address %s (family %u): %s", (addr != NULL) ? str : "NULL",
                     (addr != NULL) ? (unsigned)name->sin_family : 0u, why);
        return -FI_EINVAL;
    }
    return 0;
}

void axon_fi_name_make(struct in_addr ip, uint16_t port, uint64_t id, axon_fi_name_t *name)
{
    uint64_t le = htole64(id);

    memset(name, 0, sizeof(*name));
    name->sin_family = AF_INET;
    name->sin_port   = port;
    name->sin_addr   = ip;
    memcpy(name->sin_zero, &le, sizeof(le));
}

void axon_fi_name_str(const axon_fi_name_t *name, char *buf, size_t len)
{
    char ip[INET_ADDRSTRLEN];

    inet_ntop(AF_INET, &name->sin_addr, ip, sizeof(ip));
    snprintf(buf, len, "fi_axon://%s:%u/%016llx", ip, ntohs(name->sin_port),
             (unsigned long long)axon_fi_name_id(name));
}

static struct in_addr axon_fi_pick_ip(void)
{
    struct ifaddrs *ifs, *ifa;
    struct in_addr ip;
    const char *want = NULL;
    char *param = NULL;

    ip.s_addr = htonl(INADDR_LOOPBACK);
    if ((fi_param_get_str(&axon_fi_prov, "iface", &param) == FI_SUCCESS) && (param != NULL) &&
        (*param != '\0')) {
        want = param;
    }
    if (getifaddrs(&ifs) != 0) {
        return ip;
    }
    for (ifa = ifs; ifa != NULL; ifa = ifa->ifa_next) {
        if ((ifa->ifa_addr == NULL) || (ifa->ifa_addr->sa_family != AF_INET) ||
            !(ifa->ifa_flags & IFF_UP)) {
            continue;
        }
        if (want != NULL ? strcmp(ifa->ifa_name, want) != 0 :
                           (ifa->ifa_flags & IFF_LOOPBACK) != 0) {
            continue;
        }
        ip = ((struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
        break;
    }
    if ((want != NULL) && (ifa == NULL)) {
        AXON_FI_WARN(FI_LOG_CORE, "FI_AXON_IFACE=%s: no such IPv4 interface up; using 127.0.0.1",
                     want);
    }
    freeifaddrs(ifs);
    return ip;
}

static pthread_once_t axon_fi_ip_once = PTHREAD_ONCE_INIT;
static struct in_addr axon_fi_ip;

static void axon_fi_ip_pick(void)
{
    axon_fi_ip = axon_fi_pick_ip();
}

/* Looked up once: interfaces are walked when the first name is made. */
struct in_addr axon_fi_default_ip(void)
{
    pthread_once(&axon_fi_ip_once, axon_fi_ip_pick);
    return axon_fi_ip;
}

int axon_fi_name_resolve(const char *node, const char *service, axon_fi_name_t *name)
{
    struct addrinfo hints, *ai = NULL;
    struct in_addr ip = axon_fi_default_ip();
    uint16_t port = 0;
    int ret;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family   = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if ((node != NULL) || (service != NULL)) {
        ret = getaddrinfo(node, service, &hints, &ai);
        if ((ret != 0) || (ai == NULL)) {
            AXON_FI_INFO(FI_LOG_CORE, "node '%s' service '%s': %s", node ? node : "",
                         service ? service : "", gai_strerror(ret));
            return -FI_ENODATA;
        }
        port = ((struct sockaddr_in *)ai->ai_addr)->sin_port;
        if (node != NULL) {
            ip = ((struct sockaddr_in *)ai->ai_addr)->sin_addr;
        }
        freeaddrinfo(ai);
    }
    axon_fi_name_make(ip, port, 0, name);
    return 0;
}
