import DaemonLoop
import KeychainRegistry
import LoginControl

extension Latchkeyd {
    /// The control face over the login: each control socket request is answered by `login`, from the origin
    /// the peer's uid gives (root: a login; anyone else: a process of the user).
    static func answerControl(_ login: UserLogin) -> ServiceLoop.ControlAnswer {
        { request, uid, reply in login.answer(request, from: ControlOrigin(peerUID: uid), reply: reply) }
    }
}
