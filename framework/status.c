/* Status strings: the text of every axon_status_t (axon_status.h). */
#include "axon_status.h"

const char *axon_status_string(axon_status_t status)
{
    switch (status) {
    case AXON_OK:                   return "Success";
    case AXON_INPROGRESS:           return "Operation in progress";
    case AXON_ERR_NO_MESSAGE:       return "No pending message";
    case AXON_ERR_NO_RESOURCE:      return "Resources are temporarily unavailable";
    case AXON_ERR_IO_ERROR:         return "Input/output error";
    case AXON_ERR_NO_MEMORY:        return "Out of memory";
    case AXON_ERR_INVALID_PARAM:    return "Invalid parameter";
    case AXON_ERR_UNREACHABLE:      return "Destination is unreachable";
    case AXON_ERR_INVALID_ADDR:     return "Address not valid";
    case AXON_ERR_UNSUPPORTED:      return "Operation not supported";
    case AXON_ERR_MSG_TRUNCATED:    return "Message truncated";
    case AXON_ERR_NO_DEVICE:        return "No such device";
    case AXON_ERR_BUSY:             return "Device is busy";
    case AXON_ERR_CANCELED:         return "Request canceled";
    case AXON_ERR_CONNECTION_RESET: return "Connection reset by remote peer";
    case AXON_ERR_ENDPOINT_TIMEOUT: return "Endpoint timeout";
    case AXON_ERR_TIMED_OUT:        return "Operation timed out";
    case AXON_ERR_NOT_FOUND:        return "Element not found";
    case AXON_ERR_NO_ELEM:          return "No such element";
    case AXON_ERR_IO_FORMAT:        return "Malformed data";
    case AXON_ERR_REMOTE_ACCESS:    return "Remote access error";
    }
    return "Unknown status";
}
