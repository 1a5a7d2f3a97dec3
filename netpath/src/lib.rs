//! netpath: receive TCP data straight into packet buffers and link it into
//! files; send files back out by their chains (filled in by the netpath issue).
