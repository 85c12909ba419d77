/*
 * What libibverbs offers about the host rather than a device: sysfs files
 * and fork protection.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "vabi.h"

const char *ibv_get_sysfs_path(void)
{
    const char *env = getenv("SYSFS_PATH");

    return ((env != NULL) && env[0]) ? env : "/sys";
}

/*
 * Read dir/file into buf (a string without its trailing newline); the bytes
 * read or -1. softib's devices have no sysfs directory (their ibdev_path is
 * empty), so for them this finds nothing, as for a device without the file.
 */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
    char path[4096];
    ssize_t len;
    int fd;

    if ((size == 0) || (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))) {
        errno = EINVAL;
        return -1;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    len = read(fd, buf, size);
    close(fd);
    if (len < 0) {
        return -1;
    }
    if ((len > 0) && (buf[len - 1] == '\n')) {
        buf[--len] = '\0';
    } else if ((size_t)len < size) {
        buf[len] = '\0';
    } else {
        buf[size - 1] = '\0';
    }
    return (int)len;
}

/*
 * softib never lets a device write into pages behind the process's back: it
 * copies through the registering process's own mappings, so a fork cannot
 * leave a region pointing at pages the parent lost. Fork protection is
 * unneeded, and the calls that ask for it have nothing to do.
 */
int ibv_fork_init(void)
{
    return 0;
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
    return IBV_FORK_UNNEEDED;
}

int ibv_dontfork_range(void *base, size_t size)
{
    (void)base;
    (void)size;
    return 0;
}

int ibv_dofork_range(void *base, size_t size)
{
    (void)base;
    (void)size;
    return 0;
}
