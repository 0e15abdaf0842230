from .aligned_allocator import aligned_allocator
from .debug_allocator import debug_allocator
from .default_allocator import default_allocator
from .null_allocator import null_allocator
from .page_aligned_allocator import page_aligned_allocator
