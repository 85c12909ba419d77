/*
 * A u64 -> u64 map with open addressing and linear probing (keys are never
 * 0): worker id -> peer and -> fi_addr in the AV, peer -> connection in an
 * endpoint, memory key -> region in a domain and -> resolved Axon key in a
 * connection. The last is the one lookup on the RMA data path; the others
 * are slow paths (FI_SOURCE, first use of a peer, registration).
 */
#include <stdlib.h>
#include <string.h>
#include "axon_fi.h"

static size_t axon_fi_map_slot(const axon_fi_map_t *map, uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key & (map->cap - 1);
}

static int axon_fi_map_resize(axon_fi_map_t *map, size_t cap)
{
    axon_fi_map_t bigger = {calloc(cap, sizeof(uint64_t)), calloc(cap, sizeof(uint64_t)), cap, 0};
    size_t i;

    if ((bigger.keys == NULL) || (bigger.vals == NULL)) {
        free(bigger.keys);
        free(bigger.vals);
        return -FI_ENOMEM;
    }
    for (i = 0; i < map->cap; ++i) {
        if (map->keys[i] != 0) {
            axon_fi_map_put(&bigger, map->keys[i], map->vals[i]);
        }
    }
    axon_fi_map_free(map);
    *map = bigger;
    return 0;
}

int axon_fi_map_put(axon_fi_map_t *map, uint64_t key, uint64_t val)
{
    size_t i;
    int ret;

    if (((map->count + 1) * 2 > map->cap) &&
        ((ret = axon_fi_map_resize(map, map->cap ? map->cap * 2 : 64)) != 0)) {
        return ret;
    }
    for (i = axon_fi_map_slot(map, key); map->keys[i] != 0; i = (i + 1) & (map->cap - 1)) {
        if (map->keys[i] == key) {
            map->vals[i] = val;
            return 0;
        }
    }
    map->keys[i] = key;
    map->vals[i] = val;
    ++map->count;
    return 0;
}

int axon_fi_map_get(const axon_fi_map_t *map, uint64_t key, uint64_t *val)
{
    size_t i;

    if (map->cap == 0) {
        return 0;
    }
    for (i = axon_fi_map_slot(map, key); map->keys[i] != 0; i = (i + 1) & (map->cap - 1)) {
        if (map->keys[i] == key) {
            *val = map->vals[i];
            return 1;
        }
    }
    return 0;
}

void axon_fi_map_del(axon_fi_map_t *map, uint64_t key)
{
    size_t i, j, home;

    if (map->cap == 0) {
        return;
    }
    for (i = axon_fi_map_slot(map, key); map->keys[i] != key; i = (i + 1) & (map->cap - 1)) {
        if (map->keys[i] == 0) {
            return;
        }
    }
    /* Backward-shift deletion keeps probe chains intact without tombstones. */
    for (j = (i + 1) & (map->cap - 1); map->keys[j] != 0; j = (j + 1) & (map->cap - 1)) {
        home = axon_fi_map_slot(map, map->keys[j]);
        if (((j > i) && ((home <= i) || (home > j))) || ((j < i) && (home <= i) && (home > j))) {
            map->keys[i] = map->keys[j];
            map->vals[i] = map->vals[j];
            i = j;
        }
    }
    map->keys[i] = 0;
    --map->count;
}

void axon_fi_map_free(axon_fi_map_t *map)
{
    free(map->keys);
    free(map->vals);
    memset(map, 0, sizeof(*map));
}
