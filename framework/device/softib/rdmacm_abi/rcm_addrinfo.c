/*
 * rdma_getaddrinfo / rdma_freeaddrinfo: the system resolver for IPv4 names
 * (softib's CM speaks IPv4 only); passive lookups give the source address,
 * active ones the destination, as librdmacm does.
 */
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include "rcm.h"

static struct sockaddr *rcm_addr_dup(const struct sockaddr *sa)
{
    struct sockaddr_in *copy = malloc(sizeof(*copy));

    if (copy != NULL) {
        memcpy(copy, sa, sizeof(*copy));
    }
    return (struct sockaddr *)copy;
}

static int rcm_hints_ok(const struct rdma_addrinfo *hints)
{
    if ((hints->ai_family != 0) && (hints->ai_family != AF_INET)) {
        rcm_bridge()->log_error("rdma_getaddrinfo: address family %d: softib's CM has AF_INET "
                                "(%d) only", hints->ai_family, AF_INET);
        return 0;
    }
    if ((hints->ai_flags & RAI_FAMILY) || (hints->ai_route_len > 0)) {
        rcm_bridge()->log_error("rdma_getaddrinfo: flags 0x%x / a route: not supported",
                                hints->ai_flags);
        return 0;
    }
    return 1;
}

int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
                     struct rdma_addrinfo **res)
{
    static const struct rdma_addrinfo no_hints;
    struct addrinfo ai_hints, *ai = NULL;
    struct sockaddr_in any;
    const struct sockaddr *addr;
    struct rdma_addrinfo *r;
    int ret;

    hints = (hints != NULL) ? hints : &no_hints;
    if (!rcm_hints_ok(hints)) {
        return EAI_FAMILY;
    }
    memset(&any, 0, sizeof(any));
    any.sin_family = AF_INET;
    addr           = (const struct sockaddr *)&any;
    if ((node != NULL) || (service != NULL)) {
        memset(&ai_hints, 0, sizeof(ai_hints));
        ai_hints.ai_family   = AF_INET;
        ai_hints.ai_socktype = SOCK_STREAM;
        ai_hints.ai_flags    = ((hints->ai_flags & RAI_PASSIVE) ? AI_PASSIVE : 0) |
                               ((hints->ai_flags & RAI_NUMERICHOST) ? AI_NUMERICHOST : 0);
        if ((ret = getaddrinfo(node, service, &ai_hints, &ai)) != 0) {
            return ret;
        }
        addr = ai->ai_addr;
    }
    if ((r = calloc(1, sizeof(*r))) == NULL) {
        freeaddrinfo(ai);
        return EAI_MEMORY;
    }
    r->ai_flags      = hints->ai_flags;
    r->ai_family     = AF_INET;
    r->ai_qp_type    = hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
    r->ai_port_space = hints->ai_port_space ? hints->ai_port_space :
                       (r->ai_qp_type == IBV_QPT_UD) ? RDMA_PS_UDP : RDMA_PS_TCP;
    if (hints->ai_flags & RAI_PASSIVE) {
        r->ai_src_addr = rcm_addr_dup(addr);
        r->ai_src_len  = sizeof(struct sockaddr_in);
    } else {
        r->ai_dst_addr = rcm_addr_dup(addr);
        r->ai_dst_len  = sizeof(struct sockaddr_in);
        if ((hints->ai_src_addr != NULL) && (hints->ai_src_addr->sa_family == AF_INET)) {
            r->ai_src_addr = rcm_addr_dup(hints->ai_src_addr);
            r->ai_src_len  = sizeof(struct sockaddr_in);
        }
    }
    freeaddrinfo(ai);
    if (((r->ai_flags & RAI_PASSIVE) ? r->ai_src_addr : r->ai_dst_addr) == NULL) {
        rdma_freeaddrinfo(r);
        return EAI_MEMORY;
    }
    *res = r;
    return 0;
}

void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
    struct rdma_addrinfo *next;

    for (; res != NULL; res = next) {
        next = res->ai_next;
        free(res->ai_src_addr);
        free(res->ai_dst_addr);
        free(res->ai_src_canonname);
        free(res->ai_dst_canonname);
        free(res->ai_route);
        free(res->ai_connect);
        free(res);
    }
}
