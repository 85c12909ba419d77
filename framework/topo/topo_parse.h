/* Locality strings and topology sources parsed (topo.h says the forms); topo's own use. */
#ifndef AXON_TOPO_PARSE_H
#define AXON_TOPO_PARSE_H

#include "axon_status.h"

typedef enum {
    AXON_TOPO_AT_UNKNOWN = 0,   /* "" */
    AXON_TOPO_AT_PCI,           /* "pci:DDDD:BB:DD.F" */
    AXON_TOPO_AT_NUMA           /* "numa:N" */
} axon_topo_at_t;

/* "pci:DDDD:BB:DD.F" with its NUL. */
#define AXON_TOPO_PCI_LOCALITY_LEN 17

typedef struct axon_topo_locality {
    axon_topo_at_t kind;
    unsigned       domain, bus, dev, func;  /* AXON_TOPO_AT_PCI */
    unsigned       numa;                    /* AXON_TOPO_AT_NUMA: os index */
} axon_topo_locality_t;

/* 0 and *out filled if str is well formed, else -1 (nothing logged). */
int axon_topo_locality_parse(const char *str, axon_topo_locality_t *out);

typedef enum {
    AXON_TOPO_SOURCE_HOST = 0,  /* "" */
    AXON_TOPO_SOURCE_XML,       /* "xml:PATH" */
    AXON_TOPO_SOURCE_SYNTHETIC  /* "synthetic:DESC" */
} axon_topo_source_t;

/*
 * The kind of a topology source and where its argument starts (*arg_p);
 * AXON_ERR_INVALID_PARAM with an error line naming it when malformed.
 */
axon_status_t axon_topo_source_parse(const char *source, axon_topo_source_t *kind,
                                     const char **arg_p);

#endif
