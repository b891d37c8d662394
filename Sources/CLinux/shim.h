#include <sys/prctl.h>

/* prctl is variadic, which Swift cannot call. */

/* Makes the process not dumpable: no core file, no ptrace attach by its own user, /proc/PID files owned by
   root. 0 on success. */
static inline int latchkey_set_not_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/* 1 when the process is dumpable, 0 when not. */
static inline int latchkey_is_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
}

#include <signal.h>

/* Asks for SIGKILL when the parent (the thread that started this process) ends. 0 on success. */
static inline int latchkey_die_with_parent(void) {
    return prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
}

/* Sets the process's name as `ps` and /proc/PID/comm show it (at most 15 bytes are kept). 0 on success. */
static inline int latchkey_set_process_name(const char *name) {
    return prctl(PR_SET_NAME, name, 0, 0, 0);
}

#include <malloc.h>

/* Makes free() overwrite every chunk it frees with `byte` (and malloc fill new chunks with its complement).
   1 on success. */
static inline int latchkey_perturb_freed_memory(int byte) {
    return mallopt(M_PERTURB, byte);
}

/* Gives the pages of free heap memory back to the system (malloc_trim(0)): 1 when some were. */
static inline int latchkey_trim_heap(void) {
    return malloc_trim(0);
}

/* Makes every thread allocate from the main arena (M_ARENA_MAX 1). 1 on success. */
static inline int latchkey_one_malloc_arena(void) {
    return mallopt(M_ARENA_MAX, 1);
}

#include <sys/auxv.h>

/* 1 when the process started in secure mode (AT_SECURE: set-user-ID and the like), where glibc ignores
   GLIBC_TUNABLES. */
static inline int latchkey_started_in_secure_mode(void) {
    return getauxval(AT_SECURE) != 0;
}

#include <string.h>

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* Overwrites 256 KiB of the calling thread's stack below the caller's frame: the frames of calls that have
   returned leave what they held (decrypted attributes, encodings made on the stack) where the next calls may
   not reach. Not inlined, so that its buffer lies below the caller, where those frames were. The wiped
   pages then go back to the kernel (MADV_DONTNEED: they read as zeros when next touched), so the wipe does
   not leave every thread that runs it holding 256 KiB of zeros. */
static __attribute__((noinline)) void latchkey_wipe_dead_stack(void) {
    unsigned char buffer[262144];
    explicit_bzero(buffer, sizeof buffer);
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = ((uintptr_t)buffer + page - 1) & ~(page - 1);
    uintptr_t end = ((uintptr_t)buffer + sizeof buffer) & ~(page - 1);
    if (end > start) {
        madvise((void *)start, end - start, MADV_DONTNEED);
    }
}

#include <sys/syscall.h>
#include <unistd.h>

/* A pidfd referring to process `pid` (pidfd_open, Linux 5.3; close-on-exec): readable once that process has
   exited, and never referring to a later process given the same pid. -1 with errno on failure. syscall is
   variadic, which Swift cannot call. */
static inline int latchkey_pidfd_open(int pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

#include <sys/socket.h>

/* accept4(2) with SOCK_CLOEXEC | SOCK_NONBLOCK: a connection no child started by another thread meanwhile can
   inherit. accept4 is declared only under _GNU_SOURCE, which Swift's Glibc module does not set; the system call
   is called directly. -1 with errno on failure. */
static inline int latchkey_accept_cloexec(int fd) {
    return (int)syscall(SYS_accept4, fd, (void *)0, (void *)0, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

#include <fcntl.h>

/* pipe2(2) (declared only under _GNU_SOURCE, as accept4): both ends created with `flags` (O_CLOEXEC,
   O_NONBLOCK) in one step. */
static inline int latchkey_pipe(int fds[2], int flags) {
    return (int)syscall(SYS_pipe2, fds, flags);
}

#include <errno.h>
#include <string.h>

/* Sends descriptor `fd` over the Unix socket `socket` (SCM_RIGHTS) with one byte of data; the control message
   macros are not callable from Swift. 0 on success, -1 with errno. MSG_NOSIGNAL: a peer gone gives EPIPE, not
   SIGPIPE. */
static inline int latchkey_send_descriptor(int socket, int fd) {
    char byte = 'F';
    struct iovec data = { .iov_base = &byte, .iov_len = 1 };
    union { struct cmsghdr header; char space[CMSG_SPACE(sizeof(int))]; } control;
    memset(&control, 0, sizeof control);
    struct msghdr message = { .msg_iov = &data, .msg_iovlen = 1,
                              .msg_control = control.space, .msg_controllen = sizeof control.space };
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &fd, sizeof(int));
    ssize_t sent;
    do { sent = sendmsg(socket, &message, MSG_NOSIGNAL); } while (sent < 0 && errno == EINTR);
    return sent == 1 ? 0 : -1;
}

/* Receives one byte and one descriptor (SCM_RIGHTS, close-on-exec) from the Unix socket `socket`: the
   descriptor; -2 at end of file (the peer closed); -1 with errno on an error, or a message that carried no
   single descriptor (any descriptors it carried are closed). */
static inline int latchkey_receive_descriptor(int socket) {
    char byte = 0;
    struct iovec data = { .iov_base = &byte, .iov_len = 1 };
    union { struct cmsghdr header; char space[CMSG_SPACE(sizeof(int) * 4)]; } control;
    memset(&control, 0, sizeof control);
    struct msghdr message = { .msg_iov = &data, .msg_iovlen = 1,
                              .msg_control = control.space, .msg_controllen = sizeof control.space };
    ssize_t received;
    do { received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC); } while (received < 0 && errno == EINTR);
    if (received == 0) return -2;
    if (received < 0) return -1;
    int found = -1, count = 0;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t n = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
            if (count++ == 0) found = fd; else close(fd);
        }
    }
    if (count != 1 || (message.msg_flags & MSG_CTRUNC)) {
        if (found >= 0) close(found);
        errno = EBADMSG;
        return -1;
    }
    return found;
}

/* Closes every descriptor from `first` on (close_range(2), Linux 5.9). 0 on success, -1 with errno. */
static inline int latchkey_close_descriptors_from(int first) {
    return (int)syscall(SYS_close_range, (unsigned)first, ~0U, 0);
}
