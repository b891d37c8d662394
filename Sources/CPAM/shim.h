#include <security/pam_modules.h>
#include <security/pam_ext.h>
#include <syslog.h>

/* pam_syslog is variadic, which Swift cannot call: this logs one finished message. */
static inline void latchkey_pam_log(pam_handle_t *handle, int priority, const char *message) {
    pam_syslog(handle, priority, "%s", message);
}

#include <sys/syscall.h>
#include <unistd.h>

/* close_range(2) is declared only under _GNU_SOURCE and syscall(2) is variadic: closes every descriptor
   from `first` up, with no ceiling. Async-signal-safe (one system call), for use between fork and exec. */
static inline int latchkey_close_from(unsigned int first) {
    return (int)syscall(SYS_close_range, first, ~0U, 0);
}
