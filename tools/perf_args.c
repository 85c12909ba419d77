/*
 * axon_perf's command line: usage, numbers with size suffixes, the size
 * list, and each option checked against the test it is given to.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axon.h"
#include "axon_perf.h"

/* ------------------------------------------------------------- arguments */

static void perf_usage(FILE *stream)
{
    fprintf(stream,
            "Usage: axon_perf --local [test options]        both sides on this host\n"
            "       axon_perf -p PORT [--wait SEC]          server: wait for one client\n"
            "       axon_perf HOST -p PORT [test options]   client: run against a server\n"
            "       axon_perf --np N -t coll_... [options]  collectives, N processes here\n"
            "       mpirun -np N axon_perf -t coll_... [options]  the same, a PMIx job\n"
            "\n"
            "Messaging and collectives benchmark over the Axon public API.\n"
            "\n"
            "  --local           run client and server as two processes on this host\n"
            "  -p PORT           TCP port of the control connection: the server listens\n"
            "                    on it (every address; 0 = any free port, printed), the\n"
            "                    client connects to it on HOST\n"
            "  --wait SEC        server: how long to wait for a client (default %d);\n"
            "                    client: how long to keep retrying the server (default %d);\n"
            "                    0 = forever\n"
            "\n"
            "Test options (given to the client, which passes them to the server):\n"
            "  -t TEST           tag_lat (ping-pong, default), tag_bw (windowed stream),\n"
            "                    ep_mem (library memory per endpoint: the server hosts one\n"
            "                    worker per peer, the client connects to each and\n"
            "                    exchanges one message with it), tag_fanin (message\n"
            "                    rate, many to one: each of --peers server workers\n"
            "                    streams windows to the client's one worker), tag_fanout\n"
            "                    (one to many: the client streams to every peer in\n"
            "                    turn), or one of the one-sided\n"
            "                    tests, on memory the peer mapped with\n"
            "                    AXON_MEM_MAP_ALLOCATE (see docs/design.md, RMA):\n"
            "                    put_lat (ping-pong of puts, each side polling the last\n"
            "                    byte of its memory), put_bw (windowed puts, one flush at\n"
            "                    the end), get_lat, get_bw (windowed), amo_lat (fetch-and-\n"
            "                    add round trips on a 64-bit word; -s 4: a 32-bit one),\n"
            "                    amo_bw (windowed posted adds on that word, one flush)\n"
            "                    or a collective (persistent: one init per size, then\n"
            "                    post and wait ITERS times): coll_barrier, coll_bcast,\n"
            "                    coll_reduce, coll_allreduce (int64 sums; root 0),\n"
            "                    coll_allgather, coll_alltoall; -s is bytes per member\n"
            "                    (a multiple of 8), its block for allgather/alltoall\n"
            "  --np N            coll_*: fork N processes here (1..%d); without it, run\n"
            "                    over the job of a PMIx launcher (mpirun)\n"
            "  --overlap         coll_*: compute (as long as the collective takes) between\n"
            "                    post and wait; adds overlap_pct= to the lines\n"
            "  --peers N         tag_fanin, tag_fanout: peers, one worker each in the\n"
            "                    server process (default %d, at most %d)\n"
            "  -s SIZE[,SIZE..]  message sizes in bytes, k/m/g suffixes allowed (default 8)\n"
            "  -n ITERS          measured iterations (default 100000 for the *_lat tests,\n"
            "                    1000 for coll_*, 10000 for the others); ep_mem: peers\n"
            "                    (default 64, at most %d)\n"
            "  -w WINDOW         tag_bw, put_bw, get_bw, amo_bw: operations in flight;\n"
            "                    tag_fan*: messages in flight per peer (default 32)\n"
            "  -W WARMUP         iterations before timing starts (default min(1000, ITERS/10))\n"
            "  -c                verify received data (off by default)\n"
            "  -D LAYOUT         tag_lat, tag_bw, put_*, get_*: non-contiguous data, the\n"
            "                    packed size being -s; tag tests use it on both sides,\n"
            "                    put/get on the local side (the remote side: -R).\n"
            "                    strided:BLOCK:STRIDE: -s / BLOCK blocks of\n"
            "                    BLOCK bytes, STRIDE (>= BLOCK) apart; iov:N: N pieces of\n"
            "                    -s / N bytes, each followed by a gap of a piece's length.\n"
            "                    -s must split evenly; -c checks the data through it\n"
            "  -R LAYOUT         put_*, get_*: the target's side is a layout (the same\n"
            "                    shapes as -D, packed size -s; combines with -D): the\n"
            "                    target maps its buffer with AXON_MEM_MAP_LAYOUT, one\n"
            "                    key per size, and each put or get is one operation on\n"
            "                    that key; -c checks the data through it, gaps included\n"
            "  --separate-puts   put_bw -R, no -D: instead of the layout key, one put per\n"
            "                    piece into a contiguous key at the piece's place (-w:\n"
            "                    puts in flight); an iteration is all pieces\n"
            "  --pack-unpack     put_bw -R: instead of the layout key, gather (through -D)\n"
            "                    into a bounce buffer, put it contiguous into one of -w\n"
            "                    bounce slots of the target, flush, send the target a tag\n"
            "                    message naming the slot; the target scatters the slot\n"
            "                    into its layout and answers; an iteration ends with the\n"
            "                    answer (-w of them in flight)\n"
            "  -h, --help        print this help\n"
            "\n"
            "The client prints a '# lanes:' line with the transports chosen, then one\n"
            "line per size:\n"
            "  RESULT test=T tl=LANE size=S iters=N latency_us=X bandwidth_MBps=Y "
            "msgrate_Mps=Z\n"
            "with -D followed by layout=strided:BLOCK:STRIDE or layout=iov:N, with -R by\n"
            "rlayout=LAYOUT rmethod=key|separate_puts|pack_unpack.\n"
            "ep_mem prints the heap growth of the client process (mallinfo2) per peer\n"
            "and the time to create an endpoint and exchange a message with a new peer:\n"
            "  RESULT test=ep_mem tl=LANE bulk_tl=LANE eps=N bytes_per_ep=B heap_bytes=H "
            "wireup_us=T\n"
            "tag_fan* count the messages of all peers (iters is per peer; latency_us is\n"
            "the time per message) and add peers=N.\n"
            "coll_* (rank 0 prints) add ranks=N algo=A; latency_us is the largest of the\n"
            "members' averages per collective, bandwidth_MBps is size / latency.\n"
            "Each side picks its transports from its own AXON_* environment (e.g.\n"
            "AXON_TLS=tcp). Exit status: 0 success, 1 run or connection failure,\n"
            "2 bad arguments.\n", PERF_ACCEPT_WAIT_SEC, PERF_CONNECT_WAIT_SEC,
            PERF_COLL_MAX_NP, PERF_FAN_DEFAULT_PEERS, PERF_FAN_MAX_PEERS,
            PERF_EP_MEM_MAX_PEERS);
}

/* Decimal number with an optional k/m/g (binary) suffix. */
static int perf_parse_number(const char *str, int allow_suffix, unsigned long long *value_p)
{
    unsigned long long value, scale = 1;
    char              *end;

    if ((*str < '0') || (*str > '9')) {
        return -1;  /* also rejects signs and empty strings */
    }

    errno = 0;
    value = strtoull(str, &end, 10);
    if (errno != 0) {
        return -1;
    }

    if (allow_suffix && (*end != '\0') && (end[1] == '\0')) {
        switch (*end) {
        case 'k': case 'K': scale = 1ull << 10; ++end; break;
        case 'm': case 'M': scale = 1ull << 20; ++end; break;
        case 'g': case 'G': scale = 1ull << 30; ++end; break;
        default: break;
        }
    }
    if ((*end != '\0') || ((value != 0) && (scale > ULLONG_MAX / value))) {
        return -1;
    }

    *value_p = value * scale;
    return 0;
}

static int perf_parse_sizes(const char *arg, perf_params_t *params)
{
    unsigned long long value;
    char              *copy, *tok, *save = NULL;
    int                ret = 0;

    copy = strdup(arg);
    if (copy == NULL) {
        fprintf(stderr, "axon_perf: out of memory\n");
        return -1;
    }

    params->num_sizes = 0;
    if (arg[0] == '\0' || arg[strlen(arg) - 1] == ',' || strstr(arg, ",,") != NULL ||
        arg[0] == ',') {
        ret = -1;
    }
    for (tok = strtok_r(copy, ",", &save); (ret == 0) && (tok != NULL);
         tok = strtok_r(NULL, ",", &save)) {
        if ((perf_parse_number(tok, 1, &value) != 0) || (value > SIZE_MAX / 2)) {
            ret = -1;
        } else if (params->num_sizes == PERF_MAX_SIZES) {
            fprintf(stderr, "axon_perf: at most %d sizes\n", PERF_MAX_SIZES);
            ret = -1;
        } else {
            params->sizes[params->num_sizes++] = (size_t)value;
        }
    }

    if ((ret != 0) || (params->num_sizes == 0)) {
        fprintf(stderr, "axon_perf: invalid size list '%s'\n", arg);
        ret = -1;
    }
    free(copy);
    return ret;
}

int perf_parse_args(int argc, char **argv, perf_params_t *params)
{
    static const struct option long_opts[] = {
        { "local", no_argument,       NULL, 'L' },
        { "wait",  required_argument, NULL, 'T' },
        { "np",    required_argument, NULL, 'N' },
        { "overlap", no_argument,     NULL, 'O' },
        { "peers", required_argument, NULL, 'P' },
        { "separate-puts", no_argument, NULL, 'S' },
        { "pack-unpack", no_argument, NULL, 'U' },
        { "help",  no_argument,       NULL, 'h' },
        { NULL,    0,           NULL, 0   }
    };
    unsigned long long value;
    int                have_iters = 0, have_warmup = 0, have_sizes = 0;
    const char        *test_opt = NULL;  /* a test option seen (the server takes none) */
    char               short_opt[3] = "-?";
    int                opt, i;

    memset(params, 0, sizeof(*params));
    params->test      = PERF_TEST_TAG_LAT;
    params->sizes[0]  = 8;
    params->num_sizes = 1;
    params->window    = 32;
    params->wait_sec  = -1;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":t:s:n:w:W:cD:R:p:h", long_opts, NULL)) != -1) {
        if (strchr("tsnwWcDR", opt) != NULL) {
            short_opt[1] = (char)opt;
            test_opt     = short_opt;
        } else if ((opt == 'S') || (opt == 'U')) {
            test_opt = (opt == 'S') ? "--separate-puts" : "--pack-unpack";
        }
        if (((opt == 'S') || (opt == 'U')) && (params->rmethod != PERF_RMETHOD_KEY)) {
            fprintf(stderr, "axon_perf: give one of --separate-puts and --pack-unpack\n");
            return -1;
        }
        switch (opt) {
        case 'L':
            params->local = 1;
            break;
        case 'p':
            if ((perf_parse_number(optarg, 0, &value) != 0) || (value > 65535)) {
                fprintf(stderr, "axon_perf: invalid port '%s' (0..65535)\n", optarg);
                return -1;
            }
            params->port = optarg;
            break;
        case 'N':
            if ((perf_parse_number(optarg, 0, &value) != 0) || (value == 0) ||
                (value > PERF_COLL_MAX_NP)) {
                fprintf(stderr, "axon_perf: invalid --np '%s' (processes, 1..%d)\n", optarg,
                        PERF_COLL_MAX_NP);
                return -1;
            }
            params->np = (unsigned)value;
            break;
        case 'O':
            params->overlap = 1;
            break;
        case 'P':
            if ((perf_parse_number(optarg, 0, &value) != 0) || (value == 0) ||
                (value > PERF_FAN_MAX_PEERS)) {
                fprintf(stderr, "axon_perf: invalid --peers '%s' (1..%d)\n", optarg,
                        PERF_FAN_MAX_PEERS);
                return -1;
            }
            params->peers = (unsigned)value;
            break;
        case 'T':
            if ((perf_parse_number(optarg, 0, &value) != 0) || (value > INT_MAX)) {
                fprintf(stderr, "axon_perf: invalid --wait '%s' (seconds, 0 = forever)\n",
                        optarg);
                return -1;
            }
            params->wait_sec = (int)value;
            break;
        case 't':
            for (i = 0; i < PERF_TEST_LAST; ++i) {
                if (strcmp(optarg, perf_test_names[i]) == 0) {
                    break;
                }
            }
            if (i == PERF_TEST_LAST) {
                fprintf(stderr, "axon_perf: unknown test '%s' (tag_lat, tag_bw, ep_mem, "
                        "tag_fanin, tag_fanout, put_lat, put_bw, get_lat, get_bw, amo_lat, amo_bw, coll_barrier, "
                        "coll_bcast, coll_reduce, coll_allreduce, coll_allgather, "
                        "coll_alltoall)\n", optarg);
                return -1;
            }
            params->test = (perf_test_t)i;
            break;
        case 's':
            if (perf_parse_sizes(optarg, params) != 0) {
                return -1;
            }
            have_sizes = 1;
            break;
        case 'n':
            if ((perf_parse_number(optarg, 0, &value) != 0) || (value == 0) ||
                (value > ULONG_MAX / 2)) {
                fprintf(stderr, "axon_perf: invalid iteration count '%s'\n", optarg);
                return -1;
            }
            params->iters = (unsigned long)value;
            have_iters    = 1;
            break;
        case 'w':
            if ((perf_parse_number(optarg, 0, &value) != 0) || (value == 0) ||
                (value > PERF_MAX_WINDOW)) {
                fprintf(stderr, "axon_perf: invalid window '%s' (1..%d)\n", optarg,
                        PERF_MAX_WINDOW);
                return -1;
            }
            params->window = (unsigned)value;
            break;
        case 'W':
            if ((perf_parse_number(optarg, 0, &value) != 0) || (value > ULONG_MAX / 2)) {
                fprintf(stderr, "axon_perf: invalid warmup count '%s'\n", optarg);
                return -1;
            }
            params->warmup = (unsigned long)value;
            have_warmup    = 1;
            break;
        case 'c':
            params->check = 1;
            break;
        case 'D':
            if (perf_layout_parse(optarg, &params->layout) != 0) {
                return -1;
            }
            break;
        case 'R':
            if (perf_layout_parse(optarg, &params->rlayout) != 0) {
                return -1;
            }
            break;
        case 'S':
            params->rmethod = PERF_RMETHOD_SEPARATE_PUTS;
            break;
        case 'U':
            params->rmethod = PERF_RMETHOD_PACK_UNPACK;
            break;
        case 'h':
            perf_usage(stdout);
            exit(0);
        case ':':
            fprintf(stderr, "axon_perf: option '%s' needs a value\n", argv[optind - 1]);
            return -1;
        default:
            fprintf(stderr, "axon_perf: unknown option '%s' (see -h)\n", argv[optind - 1]);
            return -1;
        }
    }

    if (optind < argc) {
        params->host = argv[optind++];
    }
    if (optind < argc) {
        fprintf(stderr, "axon_perf: unexpected argument '%s' (see -h)\n", argv[optind]);
        return -1;
    }

    if (perf_test_is_coll(params->test)) {
        if (params->local || (params->host != NULL) || (params->port != NULL) ||
            (params->wait_sec >= 0)) {
            fprintf(stderr, "axon_perf: %s runs with --np N or under a PMIx launcher "
                    "(mpirun): no --local, HOST, -p or --wait\n", perf_test_names[params->test]);
            return -1;
        }
    } else if (params->peers && !perf_test_is_fan(params->test)) {
        fprintf(stderr, "axon_perf: --peers is for tag_fanin and tag_fanout, not %s (ep_mem: "
                "-n)\n", perf_test_names[params->test]);
        return -1;
    } else if (params->np || params->overlap) {
        fprintf(stderr, "axon_perf: --np and --overlap are for the coll_* tests, not %s\n",
                perf_test_names[params->test]);
        return -1;
    } else if (params->local) {
        if ((params->host != NULL) || (params->port != NULL) || (params->wait_sec >= 0)) {
            fprintf(stderr, "axon_perf: --local runs both sides here and takes no HOST, "
                    "-p or --wait\n");
            return -1;
        }
    } else if (params->host != NULL) {
        if (params->port == NULL) {
            fprintf(stderr, "axon_perf: client mode needs the server's port: "
                    "axon_perf %s -p PORT\n", params->host);
            return -1;
        }
        if (strcmp(params->port, "0") == 0) {
            fprintf(stderr, "axon_perf: the client needs the server's port, not 0\n");
            return -1;
        }
    } else if (params->port != NULL) {
        if (test_opt != NULL) {
            fprintf(stderr, "axon_perf: %s is a client option; the server takes the test "
                    "parameters from its client\n", test_opt);
            return -1;
        }
    } else {
        fprintf(stderr, "axon_perf: give --local (both sides here), -p PORT (server) or "
                "HOST -p PORT (client); see -h\n");
        return -1;
    }

    if (params->test == PERF_TEST_EP_MEM) {
        if (!have_iters) {
            params->iters = 64;
        } else if (params->iters > PERF_EP_MEM_MAX_PEERS) {
            fprintf(stderr, "axon_perf: ep_mem measures at most %d peers, not %lu\n",
                    PERF_EP_MEM_MAX_PEERS, params->iters);
            return -1;
        }
    } else if (!have_iters && perf_test_is_coll(params->test)) {
        params->iters = 1000;
    } else if (!have_iters) {
        params->iters = ((params->test == PERF_TEST_TAG_LAT) ||
                         (params->test == PERF_TEST_PUT_LAT) ||
                         (params->test == PERF_TEST_GET_LAT) ||
                         (params->test == PERF_TEST_AMO_LAT)) ? 100000 : 10000;
    }
    if (perf_test_is_fan(params->test)) {
        params->peers = params->peers ? params->peers : PERF_FAN_DEFAULT_PEERS;
        if (perf_fan_check_params(params) != 0) {
            return -1;
        }
    }
    if (perf_test_is_rma(params->test) && (perf_rma_check_params(params) != 0)) {
        return -1;
    }
    if (perf_check_layouts(params) != 0) {
        return -1;
    }
    if ((params->test == PERF_TEST_COLL_BARRIER) && !have_sizes) {
        params->sizes[0] = 0;  /* a barrier moves no data */
    }
    if (perf_test_is_coll(params->test) && (perf_coll_check_params(params) != 0)) {
        return -1;
    }
    if (!have_warmup) {
        params->warmup = (params->iters / 10 < 1000) ? params->iters / 10 : 1000;
    }
    return 0;
}
