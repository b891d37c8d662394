import DaemonLoop
import LoginControl
import SecretService

extension Latchkeyd {
    /// The control face over the daemon: each control socket request is answered by `daemon`, from the origin
    /// the peer's uid gives (root: a login; anyone else: a process of the user).
    static func answerControl(_ daemon: SecretServiceDaemon) -> ServiceLoop.ControlAnswer {
        { request, uid, reply in daemon.answer(request, from: ControlOrigin(peerUID: uid), reply: reply) }
    }
}
