/*
 * Status codes: what every Axon call returns, from the base services up to
 * the public API. The lowest layer owns them so that no layer needs a header
 * above it; installed as <axon/axon_status.h> and included by <axon/axon.h>.
 */
#ifndef AXON_STATUS_H
#define AXON_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    AXON_OK                   =   0,
    AXON_INPROGRESS           =   1,  /* not an error: operation in flight */
    AXON_ERR_NO_MESSAGE       =  -1,  /* probe found nothing */
    AXON_ERR_NO_RESOURCE      =  -2,  /* transport resources exhausted, retry later */
    AXON_ERR_IO_ERROR         =  -3,
    AXON_ERR_NO_MEMORY        =  -4,
    AXON_ERR_INVALID_PARAM    =  -5,
    AXON_ERR_UNREACHABLE      =  -6,  /* no transport reaches the peer */
    AXON_ERR_INVALID_ADDR     =  -7,
    AXON_ERR_UNSUPPORTED      =  -8,
    AXON_ERR_MSG_TRUNCATED    =  -9,  /* message longer than the receive buffer */
    AXON_ERR_NO_DEVICE        = -10,
    AXON_ERR_BUSY             = -11,
    AXON_ERR_CANCELED         = -12,
    AXON_ERR_CONNECTION_RESET = -13,
    AXON_ERR_ENDPOINT_TIMEOUT = -14,
    AXON_ERR_TIMED_OUT        = -15,
    AXON_ERR_NOT_FOUND        = -16,
    AXON_ERR_NO_ELEM          = -17,  /* no transport/component matches */
    AXON_ERR_IO_FORMAT        = -18,  /* malformed data from outside (address, packet) */
    AXON_ERR_REMOTE_ACCESS    = -19,  /* remote memory: bad key, range or access rights */
} axon_status_t;

/** Short, stable text for a status ("Message truncated"). */
const char *axon_status_string(axon_status_t status);

#ifdef __cplusplus
}
#endif

#endif /* AXON_STATUS_H */
