/*
 * AXON_* configuration values (framework/config.c): the first byte picks a
 * value type, the rest is the value, read as axon_init reads a variable.
 * What reads must also print back (axon_info -c) as a value that reads to
 * the same: a value whose printed form means something else aborts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "fuzz.h"
#include "log.h"

typedef union {
    char                    *string;
    int                      flag;
    unsigned                 number;
    size_t                   size;
    double                   seconds;
    axon_config_allow_list_t allow;
    axon_config_names_t      names;
} axon_fuzz_config_value_t;

/* One variable of each type, each with a default its harness seeds are printed from. */
static const axon_config_entry_t axon_fuzz_config_table[] = {
    {"STRING", "softib0", "", 0, AXON_CONFIG_TYPE_STRING},
    {"BOOL", "yes", "", 0, AXON_CONFIG_TYPE_BOOL},
    {"UINT", "16", "", 0, AXON_CONFIG_TYPE_UINT},
    {"SIZE", "64k", "", 0, AXON_CONFIG_TYPE_SIZE},
    {"SIZE_AUTO", "auto", "", 0, AXON_CONFIG_TYPE_SIZE_AUTO},
    {"TIME", "10ms", "", 0, AXON_CONFIG_TYPE_TIME},
    {"ENUM", "warn", "", 0, AXON_CONFIG_TYPE_ENUM(axon_log_level_names, "a log level")},
    {"TLS", "^tcp,ud", "", 0, AXON_CONFIG_TYPE_ALLOW_LIST},
    {"LIST", "shm,rc", "", 0, AXON_CONFIG_TYPE_STRING_LIST},
    {"PATH", "/usr/lib:/opt/lib", "", 0, AXON_CONFIG_TYPE_PATH_LIST},
    AXON_CONFIG_END
};
static const unsigned axon_fuzz_config_types = sizeof(axon_fuzz_config_table) /
                                        sizeof(axon_fuzz_config_table[0]) - 1;

/* As much as axon_config_print prints of a value. */
#define AXON_FUZZ_CONFIG_PRINT_MAX 4096

/* Read str as variable entry through axon_config_parse, print it into out. */
static int axon_fuzz_config_read(const axon_config_entry_t *entry, const char *str,
                                 char *out, size_t max)
{
    axon_config_entry_t one[2] = {*entry, AXON_CONFIG_END};
    axon_fuzz_config_value_t value;
    axon_config_kv_t kv = {entry->name, str};

    memset(&value, 0, sizeof(value));
    /* No prefix: the override's name is the entry's, so it always wins. */
    if (axon_config_parse(one, NULL, &value, &kv, 1) != AXON_OK) {
        return 1;
    }
    entry->parser.write(out, max, &value, entry->parser.arg);
    axon_config_release(one, &value);
    return 0;
}

int axon_fuzz_config_value(const uint8_t *data, size_t size)
{
    char printed[AXON_FUZZ_CONFIG_PRINT_MAX], reprinted[AXON_FUZZ_CONFIG_PRINT_MAX] = "", *str;
    const axon_config_entry_t *entry;
    int verdict;

    if (size < 1) {
        return 1;
    }
    entry = &axon_fuzz_config_table[data[0] % axon_fuzz_config_types];
    str   = malloc(size);   /* the value, NUL-terminated as getenv gives it */
    if (str == NULL) {
        return 1;
    }
    memcpy(str, data + 1, size - 1);
    str[size - 1] = '\0';
    verdict = axon_fuzz_config_read(entry, str, printed, sizeof(printed));
    /* (A value printed to the brim was cut: its reading proves nothing.) */
    if ((verdict == 0) && (strlen(printed) + 1 < sizeof(printed)) &&
        ((axon_fuzz_config_read(entry, printed, reprinted, sizeof(reprinted)) != 0) ||
         strcmp(printed, reprinted))) {
        fprintf(stderr, "AXON_%s='%s' prints as '%s', which reads back as '%s'\n",
                entry->name, str, printed, reprinted);
        abort();
    }
    free(str);
    return verdict;
}

/* Each type's default, read and printed by Axon: [type][printed value]. */
int axon_fuzz_seeds_config_value(axon_fuzz_emit_t emit, void *arg)
{
    char seed[1 + AXON_FUZZ_CONFIG_PRINT_MAX];
    unsigned type;

    for (type = 0; type < axon_fuzz_config_types; ++type) {
        const axon_config_entry_t *entry = &axon_fuzz_config_table[type];

        seed[0] = (char)type;
        if (axon_fuzz_config_read(entry, entry->default_value, seed + 1,
                                  AXON_FUZZ_CONFIG_PRINT_MAX) != 0) {
            fprintf(stderr, "fuzz seeds: AXON_%s's default does not read\n", entry->name);
            return -1;
        }
        if (emit(seed, 1 + strlen(seed + 1), arg)) {
            break;
        }
    }
    return 0;
}
