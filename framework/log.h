/* Logging: one macro family with levels, filtered by AXON_LOG_LEVEL. */
#ifndef AXON_LOG_H
#define AXON_LOG_H

#include <stdarg.h>

/* C++ tests include it directly and through other headers: one linkage either way. */
#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    AXON_LOG_ERROR = 0,
    AXON_LOG_WARN,
    AXON_LOG_INFO,
    AXON_LOG_DEBUG,
    AXON_LOG_TRACE,
    AXON_LOG_LAST
} axon_log_level_t;

/* Current threshold; read by the macros so a disabled level costs one compare. */
extern axon_log_level_t axon_log_level;

const char *axon_log_level_name(axon_log_level_t level);
/* The level names by value, NULL-terminated: what AXON_LOG_LEVEL takes. */
extern const char *const axon_log_level_names[];
void axon_log_set_level(axon_log_level_t level);
/* Redirect output ("stdout", "stderr" or a file path; "%p" expands to the pid). */
int  axon_log_set_file(const char *spec);
void axon_log_printf(axon_log_level_t level, const char *file, int line,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Optional capture for tests: every formatted message (before filtering) goes here too. */
typedef void (*axon_log_hook_t)(axon_log_level_t level, const char *message, void *arg);
void axon_log_set_hook(axon_log_hook_t hook, void *arg);

/*
 * Demote errors and warnings to debug on this thread while the count is
 * above zero: for work whose failure is expected and reported by the caller
 * (an endpoint back to a peer that may have exited), where the details
 * still help at AXON_LOG_LEVEL=debug.
 */
extern __thread unsigned axon_log_demote;

#define axon_log(_level, ...)                                               \
    do {                                                                    \
        if ((_level) <= axon_log_level || axon_log_hook_active)             \
            axon_log_printf((_level), __FILE__, __LINE__, __VA_ARGS__);      \
    } while (0)

extern int axon_log_hook_active;

#define axon_error(...) axon_log(AXON_LOG_ERROR, __VA_ARGS__)
#define axon_warn(...)  axon_log(AXON_LOG_WARN,  __VA_ARGS__)
#define axon_info(...)  axon_log(AXON_LOG_INFO,  __VA_ARGS__)
#define axon_debug(...) axon_log(AXON_LOG_DEBUG, __VA_ARGS__)
#define axon_trace(...) axon_log(AXON_LOG_TRACE, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
