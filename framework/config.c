/*
 * Configuration tables: each value type is a parser object (read, write,
 * release), so parsing, releasing and printing a table is one loop with no
 * knowledge of the types in it.
 */
#include "config.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Every variable is AXON_<PREFIX><NAME>; kv overrides omit the "AXON_". */
#define AXON_CONFIG_ENV_PREFIX     "AXON_"
#define AXON_CONFIG_ENV_PREFIX_LEN (sizeof(AXON_CONFIG_ENV_PREFIX) - 1)

/* Longest AXON_<PREFIX><NAME> and longest printed value. */
#define AXON_CONFIG_NAME_MAX  256
#define AXON_CONFIG_VALUE_MAX 4096

/* A case-insensitive word and the value it stands for. */
typedef struct {
    const char *word;
    double      value;
} axon_config_unit_t;

/* Look str up in a NULL-terminated unit table; -1 if absent. */
static int axon_config_unit_find(const axon_config_unit_t *units, const char *str,
                                 double *value_p)
{
    const axon_config_unit_t *unit;

    for (unit = units; unit->word != NULL; ++unit) {
        if (!strcasecmp(unit->word, str)) {
            *value_p = unit->value;
            return 0;
        }
    }
    return -1;
}

/* Parse a leading decimal integer; strtoull alone would accept "-1" and " 1". */
static int axon_config_read_ull(const char *str, unsigned long long *value_p,
                                const char **end_p)
{
    unsigned long long value;
    char              *end;

    if (!isdigit((unsigned char)str[0])) {
        return -1;
    }
    errno = 0;
    value = strtoull(str, &end, 10);
    if (errno != 0) {
        return -1;
    }
    *value_p = value;
    *end_p   = end;
    return 0;
}

/* ---------------------------------------------------------------- string */

int axon_config_read_string(const char *str, void *dest, const void *arg)
{
    char *copy = strdup(str);

    if (copy == NULL) {
        return -1;
    }
    *(char**)dest = copy;
    return 0;
}

void axon_config_write_string(char *buf, size_t max, const void *src,
                              const void *arg)
{
    const char *value = *(char *const*)src;

    snprintf(buf, max, "%s", (value != NULL) ? value : "");
}

void axon_config_release_string(void *dest, const void *arg)
{
    free(*(char**)dest);
    *(char**)dest = NULL;
}

const axon_config_parser_t axon_config_parser_string = AXON_CONFIG_TYPE_STRING;

/* ---------------------------------------------------------------- bool */

static const axon_config_unit_t axon_config_bool_words[] = {
    {"y", 1}, {"yes", 1}, {"on", 1},  {"1", 1}, {"true", 1},
    {"n", 0}, {"no", 0},  {"off", 0}, {"0", 0}, {"false", 0},
    {NULL, 0}
};

int axon_config_read_bool(const char *str, void *dest, const void *arg)
{
    double value;

    if (axon_config_unit_find(axon_config_bool_words, str, &value) != 0) {
        return -1;
    }
    *(int*)dest = (value != 0);
    return 0;
}

void axon_config_write_bool(char *buf, size_t max, const void *src,
                            const void *arg)
{
    snprintf(buf, max, "%s", *(const int*)src ? "y" : "n");
}

const axon_config_parser_t axon_config_parser_bool = AXON_CONFIG_TYPE_BOOL;

/* ---------------------------------------------------------------- uint */

int axon_config_read_uint(const char *str, void *dest, const void *arg)
{
    unsigned long long value;
    const char        *end;

    if ((axon_config_read_ull(str, &value, &end) != 0) || (*end != '\0') ||
        (value > UINT_MAX)) {
        return -1;
    }
    *(unsigned*)dest = (unsigned)value;
    return 0;
}

void axon_config_write_uint(char *buf, size_t max, const void *src,
                            const void *arg)
{
    snprintf(buf, max, "%u", *(const unsigned*)src);
}

const axon_config_parser_t axon_config_parser_uint = AXON_CONFIG_TYPE_UINT;

/* ---------------------------------------------------------------- size */

static const axon_config_unit_t axon_config_size_units[] = {
    {"",  1},
    {"b", 1},
    {"k", 1ull << 10}, {"kb", 1ull << 10},
    {"m", 1ull << 20}, {"mb", 1ull << 20},
    {"g", 1ull << 30}, {"gb", 1ull << 30},
    {NULL, 0}
};

/* Largest unit first, so write() picks the shortest exact form. */
static const struct {
    const char *suffix;
    size_t      unit;
} axon_config_size_print_units[] = {
    {"G", (size_t)1 << 30},
    {"M", (size_t)1 << 20},
    {"K", (size_t)1 << 10},
};

int axon_config_read_size(const char *str, void *dest, const void *arg)
{
    unsigned long long value;
    const char        *end;
    double             unit;

    if (!strcasecmp(str, "inf")) {
        *(size_t*)dest = AXON_CONFIG_SIZE_INF;
        return 0;
    }
    if ((axon_config_read_ull(str, &value, &end) != 0) ||
        (axon_config_unit_find(axon_config_size_units, end, &unit) != 0)) {
        return -1;
    }
    /* SIZE_MAX itself is reserved for "inf". */
    if (value > (SIZE_MAX - 1) / (size_t)unit) {
        return -1;
    }
    *(size_t*)dest = (size_t)value * (size_t)unit;
    return 0;
}

void axon_config_write_size(char *buf, size_t max, const void *src,
                            const void *arg)
{
    size_t   value = *(const size_t*)src;
    unsigned i;

    if (value == AXON_CONFIG_SIZE_INF) {
        snprintf(buf, max, "inf");
        return;
    }
    for (i = 0; i < sizeof(axon_config_size_print_units) /
                    sizeof(axon_config_size_print_units[0]); ++i) {
        if ((value != 0) && (value % axon_config_size_print_units[i].unit == 0)) {
            snprintf(buf, max, "%zu%s", value / axon_config_size_print_units[i].unit,
                     axon_config_size_print_units[i].suffix);
            return;
        }
    }
    snprintf(buf, max, "%zu", value);
}

const axon_config_parser_t axon_config_parser_size = AXON_CONFIG_TYPE_SIZE;

int axon_config_read_size_auto(const char *str, void *dest, const void *arg)
{
    if (strcasecmp(str, "auto") == 0) {
        *(size_t *)dest = AXON_CONFIG_SIZE_AUTO;
        return 0;
    }
    if (axon_config_read_size(str, dest, arg) != 0) {
        return -1;
    }
    /* The sentinel is not a size anyone can ask for by number. */
    return (*(size_t *)dest == AXON_CONFIG_SIZE_AUTO) ? -1 : 0;
}

void axon_config_write_size_auto(char *buf, size_t max, const void *src, const void *arg)
{
    if (*(const size_t *)src == AXON_CONFIG_SIZE_AUTO) {
        snprintf(buf, max, "auto");
        return;
    }
    axon_config_write_size(buf, max, src, arg);
}

/* ---------------------------------------------------------------- time */

static const axon_config_unit_t axon_config_time_units[] = {
    {"",   1},
    {"s",  1},
    {"ms", 1e-3},
    {"us", 1e-6},
    {"ns", 1e-9},
    {NULL, 0}
};

static const struct {
    const char *suffix;
    double      unit;
} axon_config_time_print_units[] = {
    {"s",  1},
    {"ms", 1e-3},
    {"us", 1e-6},
    {"ns", 1e-9},
};

int axon_config_read_time(const char *str, void *dest, const void *arg)
{
    double value, unit;
    char  *end;

    /* strtod would also take a sign, spaces, "nan", "inf" and hex. */
    if (!isdigit((unsigned char)str[0]) && (str[0] != '.')) {
        return -1;
    }
    if ((str[0] == '0') && ((str[1] == 'x') || (str[1] == 'X'))) {
        return -1;
    }
    errno = 0;
    value = strtod(str, &end);
    if ((errno != 0) || (end == str) ||
        (axon_config_unit_find(axon_config_time_units, end, &unit) != 0)) {
        return -1;
    }
    value *= unit;
    if (!isfinite(value)) {
        return -1;
    }
    *(double*)dest = value;
    return 0;
}

void axon_config_write_time(char *buf, size_t max, const void *src,
                            const void *arg)
{
    static const unsigned print_units = sizeof(axon_config_time_print_units) /
                                        sizeof(axon_config_time_print_units[0]);
    double                value       = *(const double*)src;
    char                  digits[32];
    unsigned              i;

    /* Round to the digits printed first, so the unit fits what is printed:
     * 0.99999999999 s is "1s", not "1000ms" (which would read back as 1 s). */
    snprintf(digits, sizeof(digits), "%.10g", value);
    value = strtod(digits, NULL);
    /* The largest unit that keeps the number >= 1: "10us", not "1e-05s". */
    for (i = 0; i + 1 < print_units; ++i) {
        if ((value == 0) || (value >= axon_config_time_print_units[i].unit)) {
            break;
        }
    }
    snprintf(buf, max, "%.10g%s", value / axon_config_time_print_units[i].unit,
             axon_config_time_print_units[i].suffix);
}

const axon_config_parser_t axon_config_parser_time = AXON_CONFIG_TYPE_TIME;

/* ---------------------------------------------------------------- enum */

int axon_config_read_enum(const char *str, void *dest, const void *arg)
{
    const char *const *names = arg;
    unsigned           i;

    for (i = 0; names[i] != NULL; ++i) {
        if (!strcasecmp(names[i], str)) {
            *(unsigned*)dest = i;
            return 0;
        }
    }
    return -1;
}

void axon_config_write_enum(char *buf, size_t max, const void *src, const void *arg)
{
    const char *const *names = arg;
    unsigned           value = *(const unsigned*)src;
    unsigned           i;

    /* Walk rather than index: a corrupt value must not read past the array. */
    for (i = 0; names[i] != NULL; ++i) {
        if (i == value) {
            snprintf(buf, max, "%s", names[i]);
            return;
        }
    }
    snprintf(buf, max, "<%u>", value);
}

/* ---------------------------------------------------------------- lists */

/* How a list parser splits its string; string and path lists differ only here. */
typedef struct {
    char sep;
    int  trim;        /* strip spaces around each item */
    int  skip_empty;  /* drop empty items instead of rejecting them */
} axon_config_list_fmt_t;

static const axon_config_list_fmt_t axon_config_string_list_fmt = {',', 1, 0};
static const axon_config_list_fmt_t axon_config_path_list_fmt   = {':', 0, 1};

void axon_config_names_release(axon_config_names_t *names)
{
    unsigned i;

    for (i = 0; i < names->count; ++i) {
        free(names->names[i]);
    }
    free(names->names);
    names->names = NULL;
    names->count = 0;
}

int axon_config_names_append(axon_config_names_t *names, const char *item, size_t len)
{
    char **array;
    char  *copy;

    copy = strndup(item, len);
    if (copy == NULL) {
        return -1;
    }
    array = realloc(names->names, (names->count + 1) * sizeof(*array));
    if (array == NULL) {
        free(copy);
        return -1;
    }
    array[names->count++] = copy;
    names->names          = array;
    return 0;
}

/*
 * Split str into names. A string that is empty (or, when trimming, only
 * spaces) is an empty list; otherwise an empty item is an error unless the
 * format skips it.
 */
static int axon_config_names_read(const char *str, axon_config_names_t *names,
                                  const axon_config_list_fmt_t *fmt)
{
    axon_config_names_t result = {NULL, 0};
    const char         *item, *end, *next;

    item = str;
    if (fmt->trim) {
        while (isspace((unsigned char)*item)) {
            ++item;
        }
    }
    if (*item == '\0') {
        *names = result;
        return 0;
    }

    for (item = str; ; item = next + 1) {
        next = strchr(item, fmt->sep);
        end  = (next != NULL) ? next : item + strlen(item);
        if (fmt->trim) {
            while ((item < end) && isspace((unsigned char)*item)) {
                ++item;
            }
            while ((end > item) && isspace((unsigned char)end[-1])) {
                --end;
            }
        }
        if (end == item) {
            if (!fmt->skip_empty) {
                goto err;
            }
        } else if (axon_config_names_append(&result, item, (size_t)(end - item)) != 0) {
            goto err;
        }
        if (next == NULL) {
            break;
        }
    }

    *names = result;
    return 0;

err:
    axon_config_names_release(&result);
    return -1;
}

static void axon_config_names_write(char *buf, size_t max,
                                    const axon_config_names_t *names, char sep)
{
    const char sep_str[2] = {sep, '\0'};
    size_t     len        = 0;
    unsigned   i;
    int        ret;

    buf[0] = '\0';
    for (i = 0; (i < names->count) && (len < max); ++i) {
        ret = snprintf(buf + len, max - len, "%s%s", (i > 0) ? sep_str : "",
                       names->names[i]);
        if (ret < 0) {
            return;
        }
        len += (size_t)ret;
    }
}

int axon_config_read_string_list(const char *str, void *dest, const void *arg)
{
    return axon_config_names_read(str, dest, &axon_config_string_list_fmt);
}

void axon_config_write_string_list(char *buf, size_t max, const void *src,
                                   const void *arg)
{
    axon_config_names_write(buf, max, src, axon_config_string_list_fmt.sep);
}

int axon_config_read_path_list(const char *str, void *dest, const void *arg)
{
    return axon_config_names_read(str, dest, &axon_config_path_list_fmt);
}

void axon_config_write_path_list(char *buf, size_t max, const void *src,
                                 const void *arg)
{
    axon_config_names_write(buf, max, src, axon_config_path_list_fmt.sep);
}

void axon_config_release_names(void *dest, const void *arg)
{
    axon_config_names_release(dest);
}

const axon_config_parser_t axon_config_parser_string_list = AXON_CONFIG_TYPE_STRING_LIST;

const axon_config_parser_t axon_config_parser_path_list = AXON_CONFIG_TYPE_PATH_LIST;

/* ---------------------------------------------------------------- allow list */

int axon_config_read_allow_list(const char *str, void *dest, const void *arg)
{
    axon_config_allow_list_t *allow = dest;
    axon_config_allow_list_t  result;
    size_t                    len;

    /* Spaces around the value, as around each name: " ^tcp" denies tcp, " all " is all. */
    while (isspace((unsigned char)*str)) {
        ++str;
    }
    len = strlen(str);
    while ((len > 0) && isspace((unsigned char)str[len - 1])) {
        --len;
    }
    if ((len == 3) && !strncasecmp(str, "all", 3)) {
        allow->mode        = AXON_CONFIG_ALLOW_ALL;
        allow->list.names  = NULL;
        allow->list.count  = 0;
        return 0;
    }

    result.mode = AXON_CONFIG_ALLOW_LISTED;
    if (str[0] == '^') {
        result.mode = AXON_CONFIG_DENY_LISTED;
        ++str;
    }
    if (axon_config_names_read(str, &result.list, &axon_config_string_list_fmt) != 0) {
        return -1;
    }
    /* An empty list would silently allow nothing (or everything): say "all". */
    if (result.list.count == 0) {
        return -1;
    }
    *allow = result;
    return 0;
}

void axon_config_write_allow_list(char *buf, size_t max, const void *src,
                                  const void *arg)
{
    const axon_config_allow_list_t *allow = src;

    if (allow->mode == AXON_CONFIG_ALLOW_ALL) {
        snprintf(buf, max, "all");
        return;
    }
    if ((allow->mode == AXON_CONFIG_DENY_LISTED) && (max > 1)) {
        buf[0] = '^';
        ++buf;
        --max;
    }
    axon_config_names_write(buf, max, &allow->list, ',');
}

void axon_config_release_allow_list(void *dest, const void *arg)
{
    axon_config_allow_list_t *allow = dest;

    axon_config_names_release(&allow->list);
    allow->mode = AXON_CONFIG_ALLOW_ALL;
}

const axon_config_parser_t axon_config_parser_allow_list = AXON_CONFIG_TYPE_ALLOW_LIST;

int axon_config_in_range(const char *name, unsigned long long value, unsigned long long min,
                         unsigned long long max)
{
    if ((value < min) || (value > max)) {
        axon_error("AXON_%s=%llu is invalid: must be between %llu and %llu", name, value, min,
                   max);
        return 0;
    }
    return 1;
}

int axon_config_names_contain(const axon_config_names_t *names, const char *name)
{
    unsigned i;

    for (i = 0; i < names->count; ++i) {
        if (!strcmp(names->names[i], name)) {
            return 1;
        }
    }
    return 0;
}

int axon_config_allows(const axon_config_allow_list_t *allow, const char *name)
{
    switch (allow->mode) {
    case AXON_CONFIG_ALLOW_ALL:
        return 1;
    case AXON_CONFIG_ALLOW_LISTED:
        return axon_config_names_contain(&allow->list, name);
    case AXON_CONFIG_DENY_LISTED:
        return !axon_config_names_contain(&allow->list, name);
    }
    return 0;
}

/* ---------------------------------------------------------------- tables */

static const char *axon_config_prefix(const char *prefix)
{
    return (prefix != NULL) ? prefix : "";
}

/* The value in force: the last kv override wins, then the environment, then the default. */
static const char *axon_config_lookup(const axon_config_entry_t *entry,
                                      const char *var_name, const axon_config_kv_t *kv,
                                      size_t kv_count)
{
    const char *value;
    size_t      i;

    for (i = kv_count; i > 0; --i) {
        if ((kv[i - 1].name != NULL) && !strcmp(kv[i - 1].name, var_name + AXON_CONFIG_ENV_PREFIX_LEN)) {
            return (kv[i - 1].value != NULL) ? kv[i - 1].value : "";
        }
    }
    value = getenv(var_name);
    if (value != NULL) {
        return value;
    }
    return (entry->default_value != NULL) ? entry->default_value : "";
}

static void axon_config_release_entries(const axon_config_entry_t *table, void *opts,
                                        const axon_config_entry_t *end)
{
    const axon_config_entry_t *entry;

    for (entry = table; (entry != end) && (entry->name != NULL); ++entry) {
        if (entry->parser.release != NULL) {
            entry->parser.release((char*)opts + entry->offset, entry->parser.arg);
        }
    }
}

axon_status_t axon_config_parse(const axon_config_entry_t *table, const char *prefix,
                                void *opts, const axon_config_kv_t *kv, size_t kv_count)
{
    const axon_config_entry_t *entry;
    char                       var_name[AXON_CONFIG_NAME_MAX];
    const char                *value;
    int                        ret;

    prefix = axon_config_prefix(prefix);
    for (entry = table; entry->name != NULL; ++entry) {
        ret = snprintf(var_name, sizeof(var_name), AXON_CONFIG_ENV_PREFIX "%s%s", prefix,
                       entry->name);
        if ((ret < 0) || ((size_t)ret >= sizeof(var_name))) {
            axon_error("configuration name %s%s%s is too long", AXON_CONFIG_ENV_PREFIX,
                       prefix, entry->name);
            goto err;
        }

        value = axon_config_lookup(entry, var_name, kv, kv_count);
        if (entry->parser.read(value, (char*)opts + entry->offset,
                               entry->parser.arg) != 0) {
            axon_error("invalid value '%s' for %s: expected %s", value, var_name,
                       entry->parser.syntax);
            goto err;
        }
    }
    return AXON_OK;

err:
    /* entry itself failed, so read() left nothing to free there. */
    axon_config_release_entries(table, opts, entry);
    return AXON_ERR_INVALID_PARAM;
}

void axon_config_release(const axon_config_entry_t *table, void *opts)
{
    axon_config_release_entries(table, opts, NULL);
}

int axon_config_table_has(const axon_config_entry_t *table, const char *prefix,
                          const char *name)
{
    const axon_config_entry_t *entry;
    size_t                     prefix_len;

    prefix     = axon_config_prefix(prefix);
    prefix_len = strlen(prefix);
    if (strncmp(name, prefix, prefix_len) != 0) {
        return 0;
    }
    for (entry = table; entry->name != NULL; ++entry) {
        if (!strcmp(name + prefix_len, entry->name)) {
            return 1;
        }
    }
    return 0;
}

void axon_config_print(const axon_config_entry_t *table, const char *prefix,
                       const void *opts, FILE *stream)
{
    const axon_config_entry_t *entry;
    char                       value[AXON_CONFIG_VALUE_MAX];

    prefix = axon_config_prefix(prefix);
    for (entry = table; entry->name != NULL; ++entry) {
        entry->parser.write(value, sizeof(value), (const char*)opts + entry->offset,
                            entry->parser.arg);
        fprintf(stream, "#\n# %s\n#\n# syntax:  %s\n# default: %s\n#\n"
                AXON_CONFIG_ENV_PREFIX "%s%s=%s\n\n",
                (entry->doc != NULL) ? entry->doc : "", entry->parser.syntax,
                (entry->default_value != NULL) ? entry->default_value : "",
                prefix, entry->name, value);
    }
}
