/* Logging: format once, write once, so lines from many processes stay whole. */
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Longest line we emit; longer messages are truncated, never split. */
#define AXON_LOG_LINE_MAX 2048

axon_log_level_t axon_log_level       = AXON_LOG_WARN;
int              axon_log_hook_active = 0;
__thread unsigned axon_log_demote     = 0;

/* For configuration and axon_log_level_name(), by level. */
const char *const axon_log_level_names[] = {
    [AXON_LOG_ERROR] = "error", [AXON_LOG_WARN] = "warn", [AXON_LOG_INFO] = "info",
    [AXON_LOG_DEBUG] = "debug", [AXON_LOG_TRACE] = "trace", [AXON_LOG_LAST] = NULL,
};
_Static_assert(sizeof(axon_log_level_names) / sizeof(axon_log_level_names[0]) == AXON_LOG_LAST + 1,
               "one name per level");

static FILE           *axon_log_file;      /* NULL: stderr */
static int             axon_log_file_owned; /* opened by us, so ours to close */
static axon_log_hook_t axon_log_hook;
static void           *axon_log_hook_arg;
static char            axon_log_hostname[64];

const char *axon_log_level_name(axon_log_level_t level)
{
    if ((unsigned)level >= AXON_LOG_LAST) {
        return "?";
    }
    return axon_log_level_names[level];
}

static const char *axon_log_level_tag(axon_log_level_t level)
{
    /* in the line prefix, upper case to stand out */
    static const char *const tags[AXON_LOG_LAST] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

    if ((unsigned)level >= AXON_LOG_LAST) {
        return "?";
    }
    return tags[level];
}

void axon_log_set_level(axon_log_level_t level)
{
    axon_log_level = level;
}

void axon_log_set_hook(axon_log_hook_t hook, void *arg)
{
    axon_log_hook        = hook;
    axon_log_hook_arg    = arg;
    axon_log_hook_active = (hook != NULL);
}

static FILE *axon_log_stream(void)
{
    return (axon_log_file != NULL) ? axon_log_file : stderr;
}

static const char *axon_log_host(void)
{
    /* Cached: the host does not change, and gethostname is a syscall. */
    if (axon_log_hostname[0] == '\0') {
        if (gethostname(axon_log_hostname, sizeof(axon_log_hostname) - 1) != 0) {
            strcpy(axon_log_hostname, "?");
        }
        axon_log_hostname[sizeof(axon_log_hostname) - 1] = '\0';
    }
    return axon_log_hostname;
}

static const char *axon_log_basename(const char *file)
{
    const char *slash = strrchr(file, '/');

    return (slash != NULL) ? slash + 1 : file;
}

/* One write() per line: stdio may split a line across several syscalls. */
static void axon_log_write_line(FILE *stream, const char *line, size_t len)
{
    ssize_t ret;

    fflush(stream);  /* keep order with anything the caller printed before */
    while (len > 0) {
        ret = write(fileno(stream), line, len);
        if (ret < 0) {
            if (errno == EINTR) {
                continue;
            }
            return;
        }
        line += ret;
        len  -= (size_t)ret;
    }
}

void axon_log_printf(axon_log_level_t level, const char *file, int line,
                     const char *fmt, ...)
{
    char    buf[AXON_LOG_LINE_MAX];
    char   *msg;
    size_t  prefix_len, len;
    int     ret;
    va_list ap;

    if ((axon_log_demote > 0) && (level < AXON_LOG_DEBUG)) {
        level = AXON_LOG_DEBUG;
    }
    ret = snprintf(buf, sizeof(buf), "[%s:%d] axon %s %s:%d ", axon_log_host(),
                   (int)getpid(), axon_log_level_tag(level), axon_log_basename(file),
                   line);
    if (ret < 0) {
        return;
    }
    /* Leave room for the message and the final newline. */
    prefix_len = ((size_t)ret < sizeof(buf) / 2) ? (size_t)ret : sizeof(buf) / 2;
    msg        = buf + prefix_len;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(buf) - prefix_len - 1, fmt, ap);
    va_end(ap);

    if (axon_log_hook != NULL) {
        axon_log_hook(level, msg, axon_log_hook_arg);
    }
    if (level > axon_log_level) {
        return;
    }

    len        = prefix_len + strlen(msg);
    buf[len++] = '\n';
    axon_log_write_line(axon_log_stream(), buf, len);
}

/* Copy spec into path, replacing each "%p" by the pid; -1 if it does not fit. */
static int axon_log_expand_path(const char *spec, char *path, size_t max)
{
    size_t len = 0;
    int    ret;

    while (*spec != '\0') {
        if ((spec[0] == '%') && (spec[1] == 'p')) {
            ret = snprintf(path + len, max - len, "%d", (int)getpid());
            if ((ret < 0) || ((size_t)ret >= max - len)) {
                return -1;
            }
            len  += (size_t)ret;
            spec += 2;
            continue;
        }
        if (len + 1 >= max) {
            return -1;
        }
        path[len++] = *spec++;
    }
    path[len] = '\0';
    return 0;
}

static void axon_log_replace_file(FILE *file, int owned)
{
    if (axon_log_file_owned) {
        fclose(axon_log_file);
    }
    axon_log_file       = file;
    axon_log_file_owned = owned;
}

int axon_log_set_file(const char *spec)
{
    char  path[4096];
    FILE *file;

    if ((spec == NULL) || !strcmp(spec, "stderr")) {
        axon_log_replace_file(NULL, 0);
        return 0;
    }
    if (!strcmp(spec, "stdout")) {
        axon_log_replace_file(stdout, 0);
        return 0;
    }

    if (axon_log_expand_path(spec, path, sizeof(path)) != 0) {
        axon_error("log file name '%s' is too long", spec);
        return -1;
    }

    /* Append: several processes may share one file. Keep the old on failure. */
    file = fopen(path, "a");
    if (file == NULL) {
        axon_error("failed to open log file '%s': %s", path, strerror(errno));
        return -1;
    }
    axon_log_replace_file(file, 1);
    return 0;
}
