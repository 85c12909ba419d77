# components/tcp: any host, non-blocking sockets driven by epoll.
pkglib_LTLIBRARIES += components/tcp/libaxon_tcp.la
components_tcp_libaxon_tcp_la_SOURCES = \
	components/tcp/tcp_component.c \
	components/tcp/tcp_iface.c \
	components/tcp/tcp_conn_hs.c \
	components/tcp/tcp_conn_rx.c \
	components/tcp/tcp_ep.c \
	components/tcp/tcp_sock.c \
	components/tcp/tcp_siblings.c \
	components/tcp/tcp_wire.c \
	components/tcp/tcp_wire.h \
	components/tcp/tcp_sock.h \
	components/tcp/tcp.h
components_tcp_libaxon_tcp_la_CFLAGS  = $(AM_CFLAGS) -fvisibility=hidden
components_tcp_libaxon_tcp_la_LDFLAGS = -module -avoid-version -shared
components_tcp_libaxon_tcp_la_LIBADD  = libaxon.la
