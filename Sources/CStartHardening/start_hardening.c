// Runs when latchkeyd's image starts, before Swift's runtime and `main`: after exec the process is dumpable
// (exec resets PR_SET_DUMPABLE), so a process of the same user could open /proc/PID/mem or attach with
// ptrace until this runs. Doing it here shrinks that window to the dynamic loader's work
// (docs/threat-model.md, "scrypt in a helper process").
#include "CStartHardening.h"

#include <errno.h>
#include <sys/prctl.h>
#include <sys/resource.h>

static int start_hardening_error = -1;

__attribute__((constructor(101))) static void latchkey_harden_at_start(void) {
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) != 0) {
        start_hardening_error = errno;
        return;
    }
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        start_hardening_error = errno;
        return;
    }
    start_hardening_error = 0;
}

int latchkey_start_hardening_error(void) { return start_hardening_error; }
