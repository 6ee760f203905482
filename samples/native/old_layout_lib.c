/* The library of old_layout: built the way older toolchains linked (no separate code segment,
 * 2 MiB max-page-size, no RELRO), so both of its PT_LOADs map file offset 0: the text at its
 * base, the data 2 MiB above (at a file offset inside the first page). */
int libfunc_calls;

struct reading {
    char label[20];
    int value;
};

int libfunc(struct reading *r)
{
    libfunc_calls++;
    return r->value; /* r is NULL: SIGSEGV at 0x14 */
}
