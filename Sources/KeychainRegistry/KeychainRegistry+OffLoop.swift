import KeychainCore
import Posix

/// Work handed off the serving thread (the worker threads, a prompt's own thread) and its results' way back.
extension KeychainRegistry {
    /// Runs, on the serving thread, what finished elsewhere.
    package func deliverCompletions() {
        for (number, result) in inbox.take() {
            continuations.removeValue(forKey: number)?(result)
        }
    }

    /// Runs `work` on the worker thread (`onOwnThread`: on a thread of its own, for prompts that wait for a
    /// person), then `continuation` with its result on the serving thread. The stack `work` used is wiped
    /// after it (``ProcessHardening/wipeDeadStack()``).
    package func offLoop<Result: Sendable>(
        onOwnThread: Bool = false, quick: Bool = false, _ work: @escaping @Sendable () -> Result,
        then continuation: @escaping (Result) -> Void
    ) {
        continuationNumber += 1
        let number = continuationNumber
        continuations[number] = { result in
            guard let result = result as? Result else { return }
            continuation(result)
        }
        let inbox = inbox
        // Work done off the loop handles secrets (a password through the key derivation, a typed answer, a
        // decrypted keyring): once it has returned, the stack it used below this frame is overwritten, on a
        // standing worker before its next job, and on a prompt's thread before the thread ends (glibc keeps
        // the stacks of ended threads for reuse, bytes untouched).
        let job: @Sendable () -> Void = {
            inbox.post(number, work())
            ProcessHardening.wipeDeadStack()
        }
        if onOwnThread {
            runDetached(job)
        } else {
            (quick ? quickWorker : worker).enqueue(job)
        }
    }

    /// Whether work handed off is still to come back.
    package var hasWorkInProgress: Bool { !continuations.isEmpty }
}
