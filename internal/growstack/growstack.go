// Package growstack grows a goroutine's stack in one step, ahead of a deep
// call, while the stack is still shallow.
//
// A goroutine starts with a small stack, and the runtime doubles it whenever
// a call would overflow it, copying every frame in use and adjusting each
// frame's pointers from its stack map: the deeper the stack, the dearer the
// copy. An API request runs on two new goroutines (the HTTP/2 server's for
// the stream, then the timeout filter's) through some ninety frames of
// filters, routing, the provider and an HTTP client, and so paid for three or
// four copies, most of them deep: a sixth of the adapter's CPU per request in
// the 500 req/s benchmark (docs/performance.md). Making the room once, from a
// shallow point, costs one short copy instead.
package growstack

// Grow12K makes sure the calling goroutine's stack has about 12 KiB free
// below the caller's frame: called a few frames from a goroutine's start, it
// leaves a 16 KiB stack (the largest size the runtime keeps in its per-P
// caches). It grows the stack at most once, copying only the frames in use
// now; when the room is already there it costs a call and clearing the frame.
//
//go:noinline
func Grow12K() {
	var frame [12 << 10]byte
	touch(frame[:])
}

// Grow24K is Grow12K making about 24 KiB of room: a 32 KiB stack when called
// a few frames from a goroutine's start.
//
//go:noinline
func Grow24K() {
	var frame [24 << 10]byte
	touch(frame[:])
}

// touch keeps frame live, so the compiler keeps the frames as declared.
//
//go:noinline
func touch([]byte) {}
