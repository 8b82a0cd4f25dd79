"""handoffs"""
