import Glibc

/// Runs `body` on a new detached POSIX thread (FoundationEssentials, which the
/// daemon uses to stay small, has no `Thread`).
func runDetached(_ body: @escaping @Sendable () -> Void) {
    final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    let started = pthread_create(
        &thread, nil,
        { raw in
            guard let raw else { return nil }
            let box = Unmanaged<Box>.fromOpaque(raw).takeRetainedValue()
            box.body()
            return nil
        }, context)
    if started == 0 {
        pthread_detach(thread)
    } else {
        Unmanaged<Box>.fromOpaque(context).release()
        body()
    }
}
