/* The no-op launch and context functions of bench/callgrind_hot.py, and the marks that
 * start and end a variant's counted region under callgrind (session 12). */
#include <valgrind/callgrind.h>
int noop(void) { return 0; }
int get(void **c) { *c = (void *)0x5000; return 0; }
int set(void *c) { (void)c; return 0; }
int mark_start(void) { CALLGRIND_ZERO_STATS; return 0; }
int mark_end(void) { CALLGRIND_DUMP_STATS; return 0; }
