/*
 * Configuration: every variable is declared once, in a table next to its
 * default and one line of help, and read from AXON_<PREFIX><NAME>.
 * Parsers are data (axon_config_parser_t), so axon_info can print any table.
 */
#ifndef AXON_CONFIG_H
#define AXON_CONFIG_H

#include <stddef.h>
#include <stdio.h>
#include "axon_config_kv.h"
#include "axon_status.h"

typedef struct axon_config_parser {
    /* Parse str into dest; return 0 on success, -1 if str is not valid. */
    int  (*read)(const char *str, void *dest, const void *arg);
    /* Format the value at src into buf (for axon_info -c). */
    void (*write)(char *buf, size_t max, const void *src, const void *arg);
    /* Free what read() allocated (may be NULL). */
    void (*release)(void *dest, const void *arg);
    const void *arg;     /* parser argument, e.g. the names of an enum */
    const char *syntax;  /* what a valid value looks like, for errors and help */
} axon_config_parser_t;

typedef struct axon_config_entry {
    const char           *name;           /* without AXON_ and prefix */
    const char           *default_value;
    const char           *doc;            /* one line */
    size_t                offset;         /* of the field in the options struct */
    axon_config_parser_t  parser;
} axon_config_entry_t;

/* Table terminator */
#define AXON_CONFIG_END {NULL, NULL, NULL, 0, {NULL, NULL, NULL, NULL, NULL}}

/* ---- value types and their parsers ---- */

/* AXON_CONFIG_TYPE_STRING        -> char *   (malloc'd) */
/* AXON_CONFIG_TYPE_BOOL          -> int      y|yes|on|1|true / n|no|off|0|false */
/* AXON_CONFIG_TYPE_UINT          -> unsigned */
/* AXON_CONFIG_TYPE_SIZE          -> size_t   with b|k|m|g suffix (powers of 1024), or inf */
/* AXON_CONFIG_TYPE_TIME          -> double seconds, with s|ms|us|ns suffix */
/* AXON_CONFIG_TYPE_ENUM(names)   -> unsigned index into a NULL-terminated name array */
/* AXON_CONFIG_TYPE_ALLOW_LIST    -> axon_config_allow_list_t ("all", "a,b", "^a,b") */
/* AXON_CONFIG_TYPE_STRING_LIST   -> axon_config_names_t (separator ',' ) */
/* AXON_CONFIG_TYPE_PATH_LIST     -> axon_config_names_t (separator ':' ) */

typedef struct {
    char   **names;
    unsigned count;
} axon_config_names_t;

typedef enum {
    AXON_CONFIG_ALLOW_ALL = 0,  /* "all" */
    AXON_CONFIG_ALLOW_LISTED,   /* "a,b" */
    AXON_CONFIG_DENY_LISTED,    /* "^a,b" */
} axon_config_allow_mode_t;

typedef struct {
    axon_config_allow_mode_t mode;
    axon_config_names_t      list;
} axon_config_allow_list_t;

extern const axon_config_parser_t axon_config_parser_string;
extern const axon_config_parser_t axon_config_parser_bool;
extern const axon_config_parser_t axon_config_parser_uint;
extern const axon_config_parser_t axon_config_parser_size;
extern const axon_config_parser_t axon_config_parser_time;
extern const axon_config_parser_t axon_config_parser_allow_list;
extern const axon_config_parser_t axon_config_parser_string_list;
extern const axon_config_parser_t axon_config_parser_path_list;

int  axon_config_read_enum(const char *str, void *dest, const void *arg);
void axon_config_write_enum(char *buf, size_t max, const void *src, const void *arg);

/*
 * A table's parser field is spelled out as a brace list of functions, not as
 * a copy of the objects above: C accepts only constants in a static table.
 */
int  axon_config_read_string(const char *str, void *dest, const void *arg);
void axon_config_write_string(char *buf, size_t max, const void *src, const void *arg);
void axon_config_release_string(void *dest, const void *arg);
int  axon_config_read_bool(const char *str, void *dest, const void *arg);
void axon_config_write_bool(char *buf, size_t max, const void *src, const void *arg);
int  axon_config_read_uint(const char *str, void *dest, const void *arg);
void axon_config_write_uint(char *buf, size_t max, const void *src, const void *arg);
int  axon_config_read_size(const char *str, void *dest, const void *arg);
void axon_config_write_size(char *buf, size_t max, const void *src, const void *arg);
int  axon_config_read_time(const char *str, void *dest, const void *arg);
void axon_config_write_time(char *buf, size_t max, const void *src, const void *arg);
int  axon_config_read_allow_list(const char *str, void *dest, const void *arg);
void axon_config_write_allow_list(char *buf, size_t max, const void *src, const void *arg);
void axon_config_release_allow_list(void *dest, const void *arg);
int  axon_config_read_string_list(const char *str, void *dest, const void *arg);
void axon_config_write_string_list(char *buf, size_t max, const void *src, const void *arg);
int  axon_config_read_path_list(const char *str, void *dest, const void *arg);
void axon_config_write_path_list(char *buf, size_t max, const void *src, const void *arg);
void axon_config_release_names(void *dest, const void *arg);

#define AXON_CONFIG_TYPE_STRING \
    {axon_config_read_string, axon_config_write_string, axon_config_release_string, \
     NULL, "string"}
#define AXON_CONFIG_TYPE_BOOL \
    {axon_config_read_bool, axon_config_write_bool, NULL, \
     NULL, "bool: y|yes|on|1|true or n|no|off|0|false"}
#define AXON_CONFIG_TYPE_UINT \
    {axon_config_read_uint, axon_config_write_uint, NULL, \
     NULL, "unsigned: a decimal number"}
#define AXON_CONFIG_TYPE_SIZE \
    {axon_config_read_size, axon_config_write_size, NULL, \
     NULL, "size: <number>[b|k|m|g] or inf"}
#define AXON_CONFIG_TYPE_TIME \
    {axon_config_read_time, axon_config_write_time, NULL, \
     NULL, "time: <number>[s|ms|us|ns]"}
#define AXON_CONFIG_TYPE_ALLOW_LIST \
    {axon_config_read_allow_list, axon_config_write_allow_list, \
     axon_config_release_allow_list, \
     NULL, "allow list: all, <name>[,<name>...] or ^<name>[,<name>...]"}
#define AXON_CONFIG_TYPE_STRING_LIST \
    {axon_config_read_string_list, axon_config_write_string_list, \
     axon_config_release_names, \
     NULL, "comma-separated list: <name>[,<name>...]"}
#define AXON_CONFIG_TYPE_PATH_LIST \
    {axon_config_read_path_list, axon_config_write_path_list, \
     axon_config_release_names, \
     NULL, "colon-separated list: <path>[:<path>...]"}
#define AXON_CONFIG_TYPE_ENUM(_names, _syntax) \
    {axon_config_read_enum, axon_config_write_enum, NULL, (_names), (_syntax)}

/* Value of SIZE options meaning "no limit" */
#define AXON_CONFIG_SIZE_INF  ((size_t)-1)
/* Value of SIZE_AUTO options meaning "let the library choose" */
#define AXON_CONFIG_SIZE_AUTO ((size_t)-2)

/* A size, or "auto" (AXON_CONFIG_SIZE_AUTO) */
int  axon_config_read_size_auto(const char *str, void *dest, const void *arg);
void axon_config_write_size_auto(char *buf, size_t max, const void *src, const void *arg);
#define AXON_CONFIG_TYPE_SIZE_AUTO \
    {axon_config_read_size_auto, axon_config_write_size_auto, NULL, \
     NULL, "size: auto, <number>[b|k|m|g] or inf"}

/*
 * Fill opts from the table: for each entry, an override from kv (name given
 * as PREFIX+NAME, e.g. "SHM_FIFO_SIZE"), else getenv("AXON_" PREFIX NAME),
 * else the default. A value that does not parse fails with
 * AXON_ERR_INVALID_PARAM and an error line naming the variable and value;
 * opts is then left released (nothing to free).
 */
axon_status_t axon_config_parse(const axon_config_entry_t *table, const char *prefix,
                                void *opts, const axon_config_kv_t *kv, size_t kv_count);
void          axon_config_release(const axon_config_entry_t *table, void *opts);

/* Is AXON_<name> a variable of this table (name already stripped of "AXON_")? */
int           axon_config_table_has(const axon_config_entry_t *table, const char *prefix,
                                    const char *name);

/* Print every entry: "# doc", "# syntax / default", then AXON_NAME=value. */
void          axon_config_print(const axon_config_entry_t *table, const char *prefix,
                                const void *opts, FILE *stream);

/*
 * Is value within [min, max]? If not, an error line "AXON_<name>=<value> is
 * invalid: must be between <min> and <max>" (name without "AXON_").
 */
int  axon_config_in_range(const char *name, unsigned long long value, unsigned long long min,
                          unsigned long long max);

/* Helpers for list values */
int  axon_config_names_contain(const axon_config_names_t *names, const char *name);
/* Append a copy of item's first len characters; -1 when out of memory. */
int  axon_config_names_append(axon_config_names_t *names, const char *item, size_t len);
/* Free every name and the array; the list is empty after. */
void axon_config_names_release(axon_config_names_t *names);
/* Does the allow-list admit name? */
int  axon_config_allows(const axon_config_allow_list_t *allow, const char *name);

#endif
