# tools/: axon_info, axon_perf and axon_soak.
bin_PROGRAMS += tools/axon_info tools/axon_perf tools/axon_soak
tools_axon_info_SOURCES = tools/axon_info.c
tools_axon_info_LDADD   = libaxon.la
tools_axon_perf_SOURCES = tools/axon_perf.c tools/axon_perf.h tools/perf_net.c \
	tools/perf_args.c tools/perf_peers.c \
	tools/perf_peers.h tools/perf_ep_mem.c tools/perf_fan.c \
	tools/perf_rma.c tools/perf_rma.h tools/perf_rlayout.c tools/perf_coll.c \
	tools/perf_layout.c tools/perf_layout.h
tools_axon_perf_LDADD   = libaxon.la
tools_axon_soak_SOURCES = tools/axon_soak.c tools/axon_soak.h tools/soak_launch.c \
	tools/soak_rank.c tools/soak_rank.h tools/soak_traffic.c tools/soak_coll.c
tools_axon_soak_LDADD   = libaxon.la
