# components/softib/: the software RDMA device. It is a device-layer back end,
# not a transport, so it is linked into libaxon where every RDMA component
# finds it through framework/device.
noinst_HEADERS += \
	components/softib/softib_wire.h
