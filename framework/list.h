/* Intrusive circular doubly linked list: O(1) insert/remove, no allocation. */
#ifndef AXON_LIST_H
#define AXON_LIST_H

#include <stddef.h>

typedef struct axon_list_link {
    struct axon_list_link *prev, *next;
} axon_list_link_t;

#define axon_container_of(ptr, type, member) \
    ((type *)((char *)(ptr) - offsetof(type, member)))

static inline void axon_list_init(axon_list_link_t *head)
{
    head->prev = head->next = head;
}

static inline int axon_list_is_empty(const axon_list_link_t *head)
{
    return head->next == head;
}

static inline void axon_list_insert_after(axon_list_link_t *pos, axon_list_link_t *elem)
{
    elem->prev       = pos;
    elem->next       = pos->next;
    pos->next->prev  = elem;
    pos->next        = elem;
}

static inline void axon_list_add_tail(axon_list_link_t *head, axon_list_link_t *elem)
{
    axon_list_insert_after(head->prev, elem);
}

static inline void axon_list_add_head(axon_list_link_t *head, axon_list_link_t *elem)
{
    axon_list_insert_after(head, elem);
}

static inline void axon_list_del(axon_list_link_t *elem)
{
    elem->prev->next = elem->next;
    elem->next->prev = elem->prev;
    elem->prev = elem->next = elem;
}

#define axon_list_first(head, type, member) axon_container_of((head)->next, type, member)

#define axon_list_for_each(elem, head, member)                                        \
    for (elem = axon_container_of((head)->next, __typeof__(*elem), member);           \
         &(elem)->member != (head);                                                   \
         elem = axon_container_of((elem)->member.next, __typeof__(*elem), member))

#define axon_list_for_each_safe(elem, tmp, head, member)                              \
    for (elem = axon_container_of((head)->next, __typeof__(*elem), member),           \
         tmp  = axon_container_of((elem)->member.next, __typeof__(*elem), member);    \
         &(elem)->member != (head);                                                   \
         elem = tmp,                                                                  \
         tmp  = axon_container_of((elem)->member.next, __typeof__(*elem), member))

#endif
