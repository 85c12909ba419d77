/*
 * axon_soak: options, the control channel's framing, main. See axon_soak.h;
 * contrib/bench/soak.sh runs it over every transport.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "axon_soak.h"

double soak_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* All length bytes to (write) or from fd, through EINTR: 0, or -1 (error or end). */
static int soak_io_all(int fd, void *buf, size_t length, int write_it)
{
    char   *p = buf;
    ssize_t n;

    while (length > 0) {
        n = write_it ? write(fd, p, length) : read(fd, p, length);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        p += n;
        length -= (size_t)n;
    }
    return 0;
}

int soak_ctl_send(int fd, const soak_ctl_hdr_t *hdr, const void *payload)
{
    if (soak_io_all(fd, (void *)hdr, sizeof(*hdr), 1) != 0 ||
        (hdr->length > 0 && soak_io_all(fd, (void *)payload, hdr->length, 1) != 0)) {
        fprintf(stderr, "axon_soak: control message %u to/from rank %u lost: %s\n", hdr->type,
                hdr->rank, strerror(errno));
        return -1;
    }
    return 0;
}

int soak_ctl_recv(int fd, soak_ctl_hdr_t *hdr, void **payload_p)
{
    void *payload = NULL;

    *payload_p = NULL;
    if (soak_io_all(fd, hdr, sizeof(*hdr), 0) != 0) {
        return -1;
    }
    if (hdr->length > (1u << 20)) {
        fprintf(stderr, "axon_soak: control message of %u bytes is not ours\n", hdr->length);
        return -1;
    }
    if (hdr->length > 0) {
        payload = malloc(hdr->length);
        if (payload == NULL || soak_io_all(fd, payload, hdr->length, 0) != 0) {
            free(payload);
            return -1;
        }
    }
    *payload_p = payload;
    return 0;
}

static void soak_usage(FILE *stream)
{
    fprintf(stream,
            "usage: axon_soak [options]   (the transport: AXON_TLS)\n"
            "  -n RANKS        processes (2..%d, default 4)\n"
            "  -t SECONDS      traffic time (default 10)\n"
            "  -k SECONDS      kill and restart a random rank but rank 0 this often (0: never;\n"
            "                  default 4)\n"
            "  -w SECONDS      RSS warm-up: growth is measured from here (default: a fifth of\n"
            "                  the time, at least 2 s)\n"
            "  -g PCT[:MIB]    allowed RSS growth after warm-up: PCT percent or MIB MiB,\n"
            "                  whichever is larger (default 10:4)\n"
            "  -b SECONDS      a request in flight this long is lost (default 30)\n"
            "  -d SECONDS      a killed peer must be reported within this (default 20)\n"
            "  -s SEED         random seed (default: from the time)\n"
            "  -v              say what happens\n",
            SOAK_MAX_RANKS);
}

static int soak_parse_double(const char *opt, const char *arg, double min, double *value)
{
    char *end;

    *value = strtod(arg, &end);
    if (end == arg || *end != '\0' || *value < min) {
        fprintf(stderr, "axon_soak: -%s %s is invalid (a number >= %g)\n", opt, arg, min);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    soak_params_t params = {
        .ranks = 4, .time_sec = 10, .kill_interval = 4, .warmup_sec = -1,
        .rss_growth_pct = 10, .rss_growth_mib = 4, .req_bound_sec = 30,
        .detect_bound_sec = 20, .seed = (unsigned)time(NULL) ^ (unsigned)getpid(),
    };
    double value;
    char  *colon;
    int    c;

    setvbuf(stdout, NULL, _IOLBF, 0);  /* ranks and launcher share it: whole lines */
    while ((c = getopt(argc, argv, "n:t:k:w:g:b:d:s:vh")) != -1) {
        switch (c) {
        case 'n':
            if (soak_parse_double("n", optarg, 2, &value) != 0 || value > SOAK_MAX_RANKS) {
                fprintf(stderr, "axon_soak: -n %s is invalid (2..%d ranks)\n", optarg,
                        SOAK_MAX_RANKS);
                return 2;
            }
            params.ranks = (unsigned)value;
            break;
        case 't':
            if (soak_parse_double("t", optarg, 1, &params.time_sec) != 0) {
                return 2;
            }
            break;
        case 'k':
            if (soak_parse_double("k", optarg, 0, &params.kill_interval) != 0) {
                return 2;
            }
            break;
        case 'w':
            if (soak_parse_double("w", optarg, 0, &params.warmup_sec) != 0) {
                return 2;
            }
            break;
        case 'g':
            colon = strchr(optarg, ':');
            if (colon != NULL) {
                *colon = '\0';
                if (soak_parse_double("g", colon + 1, 0, &params.rss_growth_mib) != 0) {
                    return 2;
                }
            }
            if (soak_parse_double("g", optarg, 0, &params.rss_growth_pct) != 0) {
                return 2;
            }
            break;
        case 'b':
            if (soak_parse_double("b", optarg, 1, &params.req_bound_sec) != 0) {
                return 2;
            }
            break;
        case 'd':
            if (soak_parse_double("d", optarg, 1, &params.detect_bound_sec) != 0) {
                return 2;
            }
            break;
        case 's':
            if (soak_parse_double("s", optarg, 0, &value) != 0) {
                return 2;
            }
            params.seed = (unsigned)value;
            break;
        case 'v':
            params.verbose = 1;
            break;
        case 'h':
            soak_usage(stdout);
            return 0;
        default:
            soak_usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "axon_soak: unexpected argument '%s'\n", argv[optind]);
        soak_usage(stderr);
        return 2;
    }
    if (params.warmup_sec < 0) {
        params.warmup_sec = (params.time_sec / 5 > 2) ? params.time_sec / 5 : 2;
    }
    return soak_launch(&params) == 0 ? 0 : 1;
}
