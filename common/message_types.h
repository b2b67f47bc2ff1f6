// Message-type numbers: the type byte of every frame on a dslaunch connection (see common/wire.h).
//
// One table for the whole protocol so that numbers never collide. Ranges:
//   0          never valid (a frame with type 0 closes the connection)
//   1..15      handshake (common/auth/handshake.h)
//   16..63     rendezvous store (common/store/store_protocol.h): requests 16..31, responses 32..47
//   64..127    agent control plane (launcher <-> agent); numbers assigned by agent control code
//   128..143   snapshot copies (agent <-> agent, agent/replica/replica_protocol.h)
//   144..255   reserved
// The layouts of each message are specified in docs/protocol.md.
#pragma once

#include <cstdint>

namespace dslaunch::msg {

// Handshake (server -> client: kChallenge, kAuthOk, kAuthRejected; client -> server: kAuth).
inline constexpr uint8_t kChallenge = 1;
inline constexpr uint8_t kAuth = 2;
inline constexpr uint8_t kAuthOk = 3;
inline constexpr uint8_t kAuthRejected = 4;

// Store requests (client -> server).
inline constexpr uint8_t kStoreSet = 16;
inline constexpr uint8_t kStoreGet = 17;
inline constexpr uint8_t kStoreAdd = 18;
inline constexpr uint8_t kStoreCompareSet = 19;
inline constexpr uint8_t kStoreWait = 20;
inline constexpr uint8_t kStoreCheck = 21;
inline constexpr uint8_t kStoreDelete = 22;
inline constexpr uint8_t kStoreNumKeys = 23;
// A store request carried by an agent's store proxy on its control connection (proxy_protocol.h).
inline constexpr uint8_t kStoreProxied = 24;

// Store responses (server -> client), one per request, in request order.
inline constexpr uint8_t kStoreOk = 32;
inline constexpr uint8_t kStoreError = 33;
// The answer to one kStoreProxied request, matched by its tag; answers come in any order.
inline constexpr uint8_t kStoreProxiedReply = 34;

// Snapshot copies: a node's agent sends a completed in-memory snapshot slot to a peer node's agent
// (sender -> receiver: kSnapshotCopy, then the slot's bytes after its header, unframed; receiver
// -> sender: kSnapshotStored or kSnapshotRefused).
inline constexpr uint8_t kSnapshotCopy = 128;
inline constexpr uint8_t kSnapshotStored = 129;
inline constexpr uint8_t kSnapshotRefused = 130;

// Agent control plane.
inline constexpr uint8_t kFirstAgentMessage = 64;
inline constexpr uint8_t kLastAgentMessage = 127;

}  // namespace dslaunch::msg
